package transport_test

import (
	"bytes"
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/transport"
)

// Bytes a read took from the socket that the connection has not counted
// yet (its reader not run between its read(2) and the count) are in
// neither the socket nor Arrived: Reading must show them (Taking, or
// Came moved), else a look then saw nothing come from a peer that did
// send, and a client whose calls wait behind the frame would give up an
// honest connection. Here the reader is held right after the read(2)
// that takes the second part of a frame's body, and Reading is asked
// meanwhile.
func TestReadingSeesBytesTakenNotCounted(t *testing.T) {
	readingSeesBytesTaken(t, false)
}

// Over TLS (Dial's), the bytes tls.Conn takes from the socket are counted
// under it as they leave the socket: held after the read(2) that empties
// the socket of the second part's record (one record: 512 bytes, under
// what a TLS writer puts in its first records), before tls.Conn decrypts
// it, Reading must show them too; and while the reader waits for bytes it
// is not taking any.
func TestReadingSeesBytesTakenNotCountedTLS(t *testing.T) {
	readingSeesBytesTaken(t, true)
}

func readingSeesBytesTaken(t *testing.T, withTLS bool) {
	if runtime.GOOS != "linux" {
		t.Skip("reads are counted as they leave the socket on Linux only")
	}
	const size, part = 64 << 10, 8 << 10
	second := part
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var opts transport.Options
	opts.FrameTimeout = time.Minute
	var serverTLS *tls.Config
	if withTLS {
		serverTLS, opts.TLS = testcert.SelfSigned(t)
		second = 512
	}
	ctx := testCtx(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := l.Accept()
		if err == nil && serverTLS != nil {
			tc := tls.Server(nc, serverTLS)
			if err = tc.HandshakeContext(ctx); err != nil {
				nc.Close()
			}
			nc = tc
		}
		if err != nil {
			nc = nil
		}
		accepted <- nc
	}()
	rec := newRecorder(false)
	c, err := transport.Dial(ctx, l.Addr().String(), rec, &opts)
	require.NoError(t, err)
	defer func() {
		c.Close()
		recvErr(t, ctx, rec.closed)
	}()
	peer := <-accepted
	require.NotNil(t, peer)
	defer peer.Close()

	f := frame(1, string(bytes.Repeat([]byte{'x'}, size)))
	defer f.Release()
	_, err = peer.Write(f.B[:transport.HeaderSize+part])
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p := c.Reading()
		return p.Frame != 0 && p.Arrived == part && !p.Behind()
	}, 10*time.Second, time.Millisecond, "the header and first part read, the reader waiting for more not taking any")
	before := c.Reading()

	held, release := transport.HoldTakenBytesWhen(t, func() bool { return c.Reading().Unread == 0 })
	defer release() // before the Close above waits for the reader
	_, err = peer.Write(f.B[transport.HeaderSize+part : transport.HeaderSize+part+second])
	require.NoError(t, err)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no counted read took the second part (reads not counted as they leave the socket)")
	}
	p := c.Reading()
	require.Equal(t, before.Frame, p.Frame, "the same frame")
	require.Equal(t, before.Arrived, p.Arrived, "the second part is not counted in Arrived yet")
	require.Zero(t, p.Unread, "the second part has left the socket")
	require.True(t, p.Behind() || p.Came != before.Came,
		"bytes taken from the socket, not counted yet, look like nothing came: before %+v, now %+v", before, p)

	release()
	_, err = peer.Write(f.B[transport.HeaderSize+part+second:])
	require.NoError(t, err)
	got := recv(t, ctx, rec.frames)
	require.Equal(t, f.B, got)
	require.Zero(t, c.Reading().Frame, "no frame in progress")
}
