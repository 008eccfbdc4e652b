package transport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// frame returns a frame with the given id (bytes 4-11) and body.
func frame(id uint64, body string) *transport.Buffer {
	f := transport.GetBuffer()
	var h [transport.HeaderSize]byte
	binary.BigEndian.PutUint16(h[0:2], transport.Magic)
	binary.BigEndian.PutUint64(h[4:12], id)
	binary.BigEndian.PutUint32(h[12:16], uint32(len(body)))
	f.B = append(append(f.B, h[:]...), body...)
	return f
}

// recorder is a Handler that keeps frames and the close error, and echoes
// frames back when echo is set.
type recorder struct {
	echo   bool
	frames chan []byte
	closed chan error
	nClose atomic.Int32
}

func newRecorder(echo bool) *recorder {
	return &recorder{echo: echo, frames: make(chan []byte, 10000), closed: make(chan error, 10)}
}

func (r *recorder) Serve(c *transport.Conn, f *transport.Buffer) {
	r.frames <- append([]byte(nil), f.B...)
	if r.echo {
		_ = c.Send(f)
		return
	}
	f.Release()
}

func (r *recorder) Closed(c *transport.Conn, err error) {
	r.nClose.Add(1)
	r.closed <- err
}

func recv(t *testing.T, ctx context.Context, ch chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-ctx.Done():
		t.Fatal("no frame before the deadline")
		return nil
	}
}

func recvErr(t *testing.T, ctx context.Context, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		t.Fatal("not closed before the deadline")
		return nil
	}
}

// pair returns two connected conns of the given kind.
type connPair func(t *testing.T, a, b transport.Handler) (*transport.Conn, *transport.Conn)

func pipePair(t *testing.T, a, b transport.Handler) (*transport.Conn, *transport.Conn) {
	x, y := net.Pipe()
	return transport.NewConn(x, a, nil), transport.NewConn(y, b, nil)
}

func tcpPair(t *testing.T, a, b transport.Handler) (*transport.Conn, *transport.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	ca, err := transport.Dial(testCtx(t), l.Addr().String(), a, nil)
	require.NoError(t, err)
	nc := <-accepted
	require.NotNil(t, nc)
	return ca, transport.NewConn(nc, b, nil)
}

var pairs = map[string]connPair{"pipe": pipePair, "tcp": tcpPair}

func TestRoundTrip(t *testing.T) {
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			client, server := newRecorder(false), newRecorder(true)
			a, b := pair(t, client, server)
			const n = 200
			for i := range n {
				require.NoError(t, a.Send(frame(uint64(i), "hello")))
			}
			for i := range n {
				got := recv(t, ctx, client.frames)
				require.Equal(t, uint64(i), binary.BigEndian.Uint64(got[4:12]))
				require.Equal(t, "hello", string(got[transport.HeaderSize:]))
			}
			require.NoError(t, a.Close())
			require.NoError(t, a.Close(), "idempotent")
			require.ErrorIs(t, recvErr(t, ctx, client.closed), transport.ErrClosed)
			require.Error(t, recvErr(t, ctx, server.closed), "peer sees the close")
			b.Close()
			require.Equal(t, int32(1), client.nClose.Load())
			require.Equal(t, int32(1), server.nClose.Load())
			require.ErrorIs(t, a.Send(frame(1, "late")), transport.ErrClosed)
		})
	}
}

// countingConn counts Write calls.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestWritesCoalesce(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe()
	cx := &countingConn{Conn: x}
	sender := transport.NewConn(cx, newRecorder(false), nil)
	defer sender.Close()
	// Nothing reads y yet, so the writer blocks on its first write and the
	// frames queue behind it.
	const n = 1000
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Go(func() {
			for i := range n / 10 {
				_ = sender.Send(frame(uint64(g*1000+i), "0123456789012345678901234567890123456789"))
			}
		})
	}
	wg.Wait()
	rec := newRecorder(false)
	receiver := transport.NewConn(y, rec, nil)
	defer receiver.Close()
	for range n {
		recv(t, ctx, rec.frames)
	}
	w := cx.writes.Load()
	t.Logf("%d frames in %d writes", n, w)
	require.Less(t, w, int32(n/10))
}

func TestCloseFlushesQueued(t *testing.T) {
	ctx := testCtx(t)
	peer := newRecorder(false)
	a, b := tcpPair(t, newRecorder(false), peer)
	defer b.Close()
	const n = 500
	for i := range n {
		require.NoError(t, a.Send(frame(uint64(i), "queued")))
	}
	require.NoError(t, a.Close())
	for range n {
		recv(t, ctx, peer.frames)
	}
	require.ErrorIs(t, recvErr(t, ctx, peer.closed), io.EOF)
}

func TestBadMagicClosesOnlyThatConnection(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	srv := transport.NewServer(h, nil)
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	good := newRecorder(false)
	gc, err := transport.Dial(ctx, l.Addr().String(), good, nil)
	require.NoError(t, err)
	defer gc.Close()

	raw, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	require.ErrorIs(t, recvErr(t, ctx, h.closed), transport.ErrBadMagic)
	// The garbage connection is closed by the server.
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = raw.Read(make([]byte, 1))
	require.Error(t, err)

	require.NoError(t, gc.Send(frame(7, "still here")))
	got := recv(t, ctx, good.frames)
	require.Equal(t, "still here", string(got[transport.HeaderSize:]))

	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-served, transport.ErrServerClosed)
}

func TestOversizedFrameRefusedBeforeBody(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe()
	h := newRecorder(false)
	c := transport.NewConn(y, h, &transport.Options{MaxPayload: 1024})
	defer c.Close()
	defer x.Close()
	hdr := frame(1, "").B
	binary.BigEndian.PutUint32(hdr[12:16], 0xffffffff)
	go func() { _, _ = x.Write(hdr) }()
	// No body is ever sent: the refusal comes from the header alone.
	err := recvErr(t, ctx, h.closed)
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	require.Contains(t, err.Error(), "4294967295")
}

func TestLargeFrameWithinLimit(t *testing.T) {
	ctx := testCtx(t)
	client, server := newRecorder(false), newRecorder(true)
	a, b := tcpPair(t, client, server)
	defer a.Close()
	defer b.Close()
	body := string(make([]byte, 3<<20))
	require.NoError(t, a.Send(frame(1, body)))
	got := recv(t, ctx, client.frames)
	require.Len(t, got, transport.HeaderSize+len(body))
}

func TestConcurrentClose(t *testing.T) {
	a, b := pipePair(t, newRecorder(false), newRecorder(false))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { a.Close() })
		wg.Go(func() { _ = a.Send(frame(1, "x")) })
	}
	wg.Wait()
	b.Close()
	require.ErrorIs(t, a.Err(), transport.ErrClosed)
}

func TestAbortKeepsFirstError(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(false)
	a, b := pipePair(t, h, newRecorder(false))
	defer b.Close()
	first := errors.New("first")
	a.Abort(first)
	a.Abort(errors.New("second"))
	require.ErrorIs(t, recvErr(t, ctx, h.closed), first)
	a.Close()
	require.ErrorIs(t, a.Err(), first)
}

func TestTLS(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	h := newRecorder(true)
	srv := transport.NewServer(h, &transport.Options{TLS: serverTLS})
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	rec := newRecorder(false)
	c, err := transport.Dial(ctx, l.Addr().String(), rec, &transport.Options{TLS: clientTLS})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Send(frame(1, "secret")))
	got := recv(t, ctx, rec.frames)
	require.Equal(t, "secret", string(got[transport.HeaderSize:]))

	// A client that does not trust the certificate cannot connect.
	_, err = transport.Dial(ctx, l.Addr().String(), newRecorder(false), &transport.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	require.Error(t, err)
	// A plain client gets its connection closed by the failed handshake.
	plain := newRecorder(false)
	pc, err := transport.Dial(ctx, l.Addr().String(), plain, nil)
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Send(frame(1, "plain")))
	require.Error(t, recvErr(t, ctx, plain.closed))
}

func TestServerCloseClosesConnections(t *testing.T) {
	ctx := testCtx(t)
	srv := transport.NewServer(newRecorder(true), nil)
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var recs []*recorder
	for range 3 {
		r := newRecorder(false)
		c, err := transport.Dial(ctx, l.Addr().String(), r, nil)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Send(frame(1, "x")))
		recv(t, ctx, r.frames)
		recs = append(recs, r)
	}
	require.Len(t, srv.Conns(), 3)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-served, transport.ErrServerClosed)
	for _, r := range recs {
		require.Error(t, recvErr(t, ctx, r.closed))
	}
	require.ErrorIs(t, srv.Serve(l), transport.ErrServerClosed)
}

func TestSlowPeerClosed(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe() // nothing reads y
	defer y.Close()
	h := newRecorder(false)
	c := transport.NewConn(x, h, &transport.Options{MaxQueue: 64 << 10})
	defer c.Close()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = c.Send(frame(uint64(i), string(make([]byte, 1024))))
	}
	require.ErrorIs(t, err, transport.ErrSlowPeer)
	require.ErrorIs(t, recvErr(t, ctx, h.closed), transport.ErrSlowPeer)
}

// TestSendWaitWaitsForRoom: with the queue over MaxQueue, SendWait waits
// instead of closing the connection; its deadline ends the wait without
// harm, and once the peer reads, waiting frames go out in order.
func TestSendWaitWaitsForRoom(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe() // y is read only later
	defer y.Close()
	h := newRecorder(false)
	c := transport.NewConn(x, h, &transport.Options{MaxQueue: 4 << 10})
	defer c.Close()
	const n = 32
	body := string(make([]byte, 1024))
	// The writer holds at most one batch while the pipe is not read: the
	// queue fills, then a send with a past deadline gives up.
	var err error
	for i := 0; i < n && err == nil; i++ {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err = c.SendWait(short, time.Time{}, frame(uint64(i), body))
		cancel()
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, c.Err(), "a full queue must not close the connection")
	err = c.SendWait(ctx, time.Now().Add(10*time.Millisecond), frame(999, body))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, c.Err())

	// A sender that waits without a deadline gets through once y reads.
	sent := make(chan error, 1)
	go func() { sent <- c.SendWait(ctx, time.Time{}, frame(1000, "last")) }()
	read := make(chan int, 1)
	go func() {
		total := 0
		buf := make([]byte, 64<<10)
		for {
			k, err := y.Read(buf)
			total += k
			if err != nil || strings.Contains(string(buf[:k]), "last") {
				read <- total
				return
			}
		}
	}()
	require.NoError(t, <-sent)
	require.Positive(t, <-read)
	require.NoError(t, c.Err())
}

// TestMixedSizesInPieces: frames of every size class (empty, small, over
// the direct-read threshold, over the read buffer, over a MiB), sent in
// pieces of odd sizes and pipelined, arrive whole and in order, and their
// echoes (written in batches with writev) come back byte for byte.
func TestMixedSizesInPieces(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	_, addr := serve(t, h, nil)
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	sizes := []int{0, 1, 581, 4<<10 - 1, 4 << 10, 5000, 16 << 10, 40 << 10, 100 << 10, 1<<20 + 7, 3, 16 << 10}
	var stream []byte
	var want [][]byte
	for i, n := range sizes {
		body := make([]byte, n)
		for j := range body {
			body[j] = byte(i*7 + j*13)
		}
		f := frame(uint64(i), string(body))
		want = append(want, append([]byte(nil), f.B...))
		stream = append(stream, f.B...)
		f.Release()
	}
	go func() {
		// Odd pieces, so that frames and headers straddle reads.
		for p := stream; len(p) > 0; {
			k := min(len(p), 1000+len(p)%4093)
			if _, err := nc.Write(p[:k]); err != nil {
				return
			}
			p = p[k:]
		}
	}()
	for i := range sizes {
		require.Equal(t, want[i], recv(t, ctx, h.frames), "frame %d (%d bytes)", i, sizes[i])
	}
	got := make([]byte, len(stream))
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadFull(nc, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(stream, got), "the echoes match what was sent")
}
