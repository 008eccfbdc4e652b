package transport

import (
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// paceConn is a Conn as the reclaimer sees it (behindPace reads nc, opts
// and the pace fields only), over nc, with a frame of size bytes charged
// took ago and none of its body read by the server.
func paceConn(nc net.Conn, size int64, took time.Duration) *Conn {
	c := &Conn{nc: nc, opts: &Options{FrameTimeout: time.Second}}
	c.partSize.Store(size)
	c.partAt.Store(monoNow() - int64(took))
	return c
}

// TestPaceCountsBytesWaitingInSocket: a frame is behind its pace only if
// its peer did not send: bytes that wait unread in the server's socket
// (a reader short of CPU) count as sent. A 200 KiB frame 900 ms into a
// 1 s FrameTimeout should have 80 KiB (half of 200 KiB x 800/1000, and
// 64 KiB of slack); with 40 KiB sent and not read yet it is not behind,
// with nothing sent it is. Linux
// only (elsewhere the socket's unread bytes are not told).
func TestPaceCountsBytesWaitingInSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a socket's unread bytes are told on Linux only")
	}
	client, server := loopbackPair(t)

	c := paceConn(server, 200<<10, 900*time.Millisecond)
	_, _, _, behind := c.behindPace(monoNow())
	require.True(t, behind, "nothing sent of the frame")

	_, err := client.Write(make([]byte, 40<<10))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return socketUnread(server) == 40<<10 }, 10*time.Second, time.Millisecond,
		"40 KiB written, waiting in the server's socket")
	got, size, _, behind := c.behindPace(monoNow())
	require.False(t, behind, "the peer sent 40 KiB the server did not read yet: got %d of %d", got, size)
	require.Equal(t, int64(40<<10), got)
}

// TestPaceNotJudgedByPreviousFrame: the reclaimer reads a frame's start
// and then its size and bytes read; when the frame ends and the next
// begins between those reads, it must not judge the new frame (nothing
// read yet) by the old one's start (900 ms ago here), which would close
// an honest peer with "sent 0 bytes of a 102400-byte body in 900ms".
func TestPaceNotJudgedByPreviousFrame(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := paceConn(a, 100<<10, 900*time.Millisecond)
	c.arrived.Store(100 << 10) // the first frame: read whole, on pace
	hook := func() {
		// Between behindPace's reads: the first frame ends and the
		// next, as large, begins.
		c.paceEnd()
		c.paceStart(100 << 10)
	}
	testHookPaceLoaded.Store(&hook)
	defer testHookPaceLoaded.Store(nil)
	_, _, took, behind := c.behindPace(monoNow())
	require.False(t, behind, "the new frame, just begun, judged as %v old", took)
	// The next look judges the new frame by its own start.
	testHookPaceLoaded.Store(nil)
	_, _, took, behind = c.behindPace(monoNow())
	require.False(t, behind)
	require.Less(t, took, 900*time.Millisecond)
}

// TestSocketUnreadUnderPlainOnTLSSniff: a TLS server with PlainOnTLS (every
// exchange server) hands the handshake a prefixConn, under the counting
// conn: the bytes waiting in the socket are still told through both.
func TestSocketUnreadUnderPlainOnTLSSniff(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a socket's unread bytes are told on Linux only")
	}
	client, server := loopbackPair(t)
	_, err := client.Write(make([]byte, 4000))
	require.NoError(t, err)
	wrapped := tls.Server(&countingConn{Conn: &prefixConn{Conn: server}}, nil)
	require.Eventually(t, func() bool { return socketUnread(wrapped) == 4000 }, 10*time.Second, time.Millisecond,
		"unread bytes told through tls.Conn, countingConn and prefixConn")
}

// loopbackPair returns both ends of one TCP connection on 127.0.0.1,
// closed (with their listener) when the test ends.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	client, err = net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	server, err = l.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { server.Close() })
	return client, server
}
