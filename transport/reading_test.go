package transport_test

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	if runtime.GOOS != "linux" {
		t.Skip("reads are counted as they leave the socket on Linux only")
	}
	const size, part = 64 << 10, 8 << 10
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := l.Accept()
		accepted <- nc
	}()
	ctx := testCtx(t)
	rec := newRecorder(false)
	c, err := transport.Dial(ctx, l.Addr().String(), rec, &transport.Options{FrameTimeout: time.Minute})
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
	}, 10*time.Second, time.Millisecond, "the header and first part read")
	before := c.Reading()

	held, release := transport.HoldTakenBytes(t)
	defer release() // before the Close above waits for the reader
	_, err = peer.Write(f.B[transport.HeaderSize+part : transport.HeaderSize+2*part])
	require.NoError(t, err)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the second part was not read")
	}
	p := c.Reading()
	require.Equal(t, before.Frame, p.Frame, "the same frame")
	require.Equal(t, before.Arrived, p.Arrived, "the second part is not counted in Arrived yet")
	require.Zero(t, p.Unread, "the second part has left the socket")
	require.True(t, p.Behind() || p.Came != before.Came,
		"bytes taken from the socket, not counted yet, look like nothing came: before %+v, now %+v", before, p)

	release()
	_, err = peer.Write(f.B[transport.HeaderSize+2*part:])
	require.NoError(t, err)
	got := recv(t, ctx, rec.frames)
	require.Equal(t, f.B, got)
	require.Zero(t, c.Reading().Frame, "no frame in progress")
}
