package transport_test

import (
	"bytes"
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/readhook"
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
	readingSeesBytesTaken(t, plainTCP)
}

// Over TLS (Dial's), the bytes tls.Conn takes from the socket are counted
// under it as they leave the socket: held after the read(2) that empties
// the socket of the second part's record (one record: 512 bytes, under
// what a TLS writer puts in its first records), before tls.Conn decrypts
// it, Reading must show them too; and while the reader waits for bytes it
// is not taking any.
func TestReadingSeesBytesTakenNotCountedTLS(t *testing.T) {
	readingSeesBytesTaken(t, dialTLS)
}

// NewConn over a caller's own tls.Conn: this process does not read its
// socket itself, so what came is what the kernel received on it
// (Reading's Came), read or not: held in the caller's tls.Conn's reads
// after the read that empties the socket of the second part's record,
// before it decrypts it, the bytes still count as come. (Came was the
// bytes the frame took: nothing came, as far as Reading could tell.)
func TestReadingSeesBytesTakenByCallersTLSConn(t *testing.T) {
	readingSeesBytesTaken(t, ownTLS)
}

// How readingSeesBytesTaken's connection is made.
type readingMode int

const (
	plainTCP readingMode = iota // Dial, plain TCP
	dialTLS                     // Dial, TLS
	ownTLS                      // NewConn over a tls.Conn made by the test
)

func readingSeesBytesTaken(t *testing.T, mode readingMode) {
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
	if mode != plainTCP {
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
	var c *transport.Conn
	var own *readhook.Conn
	if mode == ownTLS {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", l.Addr().String())
		require.NoError(t, err)
		own = &readhook.Conn{TCPConn: nc.(*net.TCPConn)}
		cfg := opts.TLS.Clone()
		cfg.ServerName = "127.0.0.1"
		tc := tls.Client(own, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			require.NoError(t, err)
		}
		opts.TLS = nil
		c = transport.NewConn(tc, rec, &opts)
	} else {
		c, err = transport.Dial(ctx, l.Addr().String(), rec, &opts)
		require.NoError(t, err)
	}
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

	emptied := func() bool { return c.Reading().Unread == 0 }
	var held <-chan struct{}
	var release func()
	if own != nil {
		held, release = own.Hold(emptied)
	} else {
		held, release = transport.HoldTakenBytesWhen(t, emptied)
	}
	defer release() // before the Close above waits for the reader
	_, err = peer.Write(f.B[transport.HeaderSize+part : transport.HeaderSize+part+second])
	require.NoError(t, err)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no counted read took the second part (reads not counted as they leave the socket, or the tls.Conn's did not read)")
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
