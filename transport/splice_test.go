package transport_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/transport"
)

// splicedFrame returns a frame whose body is head, then the spliced p,
// then tail, with p referred to, not copied; and the body as one slice.
func splicedFrame(id uint64, head string, p []byte, tail string) (*transport.Buffer, []byte) {
	f := transport.GetBuffer()
	var h [transport.HeaderSize]byte
	binary.BigEndian.PutUint16(h[0:2], transport.Magic)
	binary.BigEndian.PutUint64(h[4:12], id)
	binary.BigEndian.PutUint32(h[12:16], uint32(len(head)+len(p)+len(tail)))
	f.B = append(append(f.B, h[:]...), head...)
	f.Splice(p)
	f.B = append(f.B, tail...)
	return f, append(append([]byte(head), p...), tail...)
}

// TestSplicedFramesWritten: frames with spliced bytes arrive whole and in
// order, mixed with plain ones, over TCP (writev from the frames' pieces),
// a pipe and TLS (copied into the buffered writer), and the spliced bytes
// are never copied into the frame's buffer.
func TestSplicedFramesWritten(t *testing.T) {
	serverTLS, clientTLS := testcert.SelfSigned(t)
	tlsPair := func(t *testing.T, a, b transport.Handler) (*transport.Conn, *transport.Conn) {
		srv := transport.NewServer(b, &transport.Options{TLS: serverTLS})
		l, err := transport.Listen("127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
		c, err := transport.Dial(testCtx(t), l.Addr().String(), a, &transport.Options{TLS: clientTLS})
		require.NoError(t, err)
		return c, nil
	}
	kinds := map[string]connPair{"tcp": tcpPair, "pipe": pipePair, "tls": tlsPair}
	for name, pair := range kinds {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			client, server := newRecorder(false), newRecorder(true)
			a, b := pair(t, client, server)
			const n = 300
			want := make([][]byte, n)
			for i := range n {
				if i%3 == 2 {
					f := frame(uint64(i), "plain")
					want[i] = []byte("plain")
					require.NoError(t, a.Send(f))
					continue
				}
				p := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*97%40000)
				f, body := splicedFrame(uint64(i), "head", p, "tail")
				require.Equal(t, transport.HeaderSize+len(body), f.Len())
				require.Len(t, f.B, transport.HeaderSize+len("headtail"), "spliced bytes are not copied in")
				require.True(t, f.Spliced())
				require.Equal(t, body, f.AppendTo(nil)[transport.HeaderSize:])
				want[i] = body
				require.NoError(t, a.Send(f))
			}
			for i := range n {
				got := recv(t, ctx, client.frames)
				require.Equal(t, uint64(i), binary.BigEndian.Uint64(got[4:12]))
				require.True(t, bytes.Equal(want[i], got[transport.HeaderSize:]), "frame %d: %d bytes, want %d", i, len(got)-transport.HeaderSize, len(want[i]))
			}
			require.NoError(t, a.Close())
			if b != nil {
				b.Close()
			}
		})
	}
}

// TestSplicedBytesCountInQueue: MaxQueue counts a frame's spliced bytes.
func TestSplicedBytesCountInQueue(t *testing.T) {
	f, _ := splicedFrame(1, "", make([]byte, 1000), "")
	require.Equal(t, transport.HeaderSize+1000, f.Len())
	f.Release()
	g := transport.GetBuffer()
	require.False(t, g.Spliced(), "Release forgets the spliced bytes")
	require.Zero(t, g.Len())
	g.Release()
}

// TestGrowOnce: Grow makes room with one allocation and keeps the bytes.
func TestGrowOnce(t *testing.T) {
	b := transport.GetBuffer()
	defer b.Release()
	b.B = append(b.B, "abc"...)
	b.Grow(20000)
	require.GreaterOrEqual(t, cap(b.B)-len(b.B), 20000)
	require.Equal(t, "abc", string(b.B))
	arr := unsafe.SliceData(b.B)
	b.B = append(b.B, make([]byte, 20000)...)
	require.Equal(t, arr, unsafe.SliceData(b.B), "no second allocation")
}

// laterSplice answers every frame with SendLater, and every third with a
// spliced frame (Send), so that the reader finds spliced frames queued
// among its own.
type laterSplice struct{ closed chan error }

func (h *laterSplice) Serve(c *transport.Conn, f *transport.Buffer) {
	id := binary.BigEndian.Uint64(f.B[4:12])
	if id%3 == 0 {
		g, _ := splicedFrame(id, "h", bytes.Repeat([]byte{byte(id)}, 5000), "t")
		f.Release()
		_ = c.SendLater(g)
		return
	}
	_ = c.SendLater(f)
}

func (h *laterSplice) Closed(_ *transport.Conn, err error) { h.closed <- err }

// TestSplicedAmongLater: the reader's own writes of SendLater frames leave
// spliced frames to the writer, and every frame arrives whole, in order.
func TestSplicedAmongLater(t *testing.T) {
	cc, nc := netConns(t)
	defer cc.Close()
	h := &laterSplice{closed: make(chan error, 1)}
	sc := transport.NewConn(nc, h, nil)
	defer sc.Close()
	const n = 60
	var all []byte
	for i := range n {
		all = append(all, rawFrame(uint64(i), "hello")...)
	}
	_, err := cc.Write(all)
	require.NoError(t, err)
	require.NoError(t, cc.SetReadDeadline(deadline(t)))
	for i := range n {
		id, body := readFrame(t, cc)
		require.Equal(t, uint64(i), id, "in order")
		if i%3 == 0 {
			require.Equal(t, "h"+strings.Repeat(string([]byte{byte(i)}), 5000)+"t", body)
		} else {
			require.Equal(t, "hello", body)
		}
	}
}

// TestLastReadAdvances: every frame that arrives after the previous one was
// served moves LastRead to a time after it was sent, on the monotonic
// clock the heartbeat and idle checks compare with time.Now.
func TestLastReadAdvances(t *testing.T) {
	ctx := testCtx(t)
	client, server := newRecorder(false), newRecorder(false)
	a, b := tcpPair(t, client, server)
	defer a.Close()
	defer b.Close()
	for i := range 20 {
		before := time.Now()
		require.NoError(t, a.Send(frame(uint64(i), "ping")))
		recv(t, ctx, server.frames)
		require.Eventually(t, func() bool { return !b.LastRead().Before(before) }, 5*time.Second, time.Millisecond, "frame %d", i)
		require.False(t, b.LastRead().After(time.Now()), "not in the future")
	}
}
