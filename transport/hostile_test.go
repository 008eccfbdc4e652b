package transport_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// politeRoundTrip sends a frame on c and reads its echo.
func politeRoundTrip(t *testing.T, c net.Conn, body string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write(frame(9, body).B)
	require.NoError(t, err)
	got := make([]byte, transport.HeaderSize+len(body))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, body, string(got[transport.HeaderSize:]))
}

// TestTrickledFrameCutOff: a peer that sends a frame one byte every 20 ms
// (it would take 2 s) is cut off FrameTimeout after its first byte: the
// deadline is the frame's, not renewed by each byte that arrives. Meanwhile
// a polite connection is served.
func TestTrickledFrameCutOff(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	_, addr := serve(t, h, &transport.Options{FrameTimeout: 300 * time.Millisecond})
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, "before")
	require.Contains(t, string(recv(t, ctx, h.frames)), "before")

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	whole := frame(1, string(make([]byte, 84))).B // 100 bytes
	trickled := make(chan int, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		for ; sent < len(whole); sent++ {
			if _, err := slow.Write(whole[sent : sent+1]); err != nil {
				break
			}
			<-tick.C
		}
		trickled <- sent
	}()
	require.ErrorIs(t, recvErr(t, ctx, h.closed), transport.ErrSlowFrame)
	politeRoundTrip(t, polite, "during")
	require.Contains(t, string(recv(t, ctx, h.frames)), "during")
	slow.Close() // ends the trickle if the server's close has not yet
	sent := <-trickled
	require.Less(t, sent, len(whole), "the frame was not completed")
	select {
	case f := <-h.frames:
		t.Fatalf("the trickled frame was served: % x", f)
	default:
	}
}

// TestPeerClosesMidFrame: a peer that closes its connection within a
// frame's header or body ends only that connection, with
// io.ErrUnexpectedEOF; the partial frame is not served.
func TestPeerClosesMidFrame(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	s, addr := serve(t, h, nil)
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, "first")
	require.Contains(t, string(recv(t, ctx, h.frames)), "first")
	whole := frame(2, "0123456789abcdef").B
	for _, cut := range []int{1, 7, transport.HeaderSize, transport.HeaderSize + 5} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = c.Write(whole[:cut])
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.ErrorIs(t, recvErr(t, ctx, h.closed), io.ErrUnexpectedEOF, "cut after %d bytes", cut)
	}
	select {
	case f := <-h.frames:
		t.Fatalf("a partial frame was served: % x", f)
	default:
	}
	politeRoundTrip(t, polite, "still")
	require.Contains(t, string(recv(t, ctx, h.frames)), "still")
	require.Len(t, s.Conns(), 1)
}

// TestHalfClosedPeer: a peer that sends whole frames and then closes its
// sending side (shutdown of writes) gets the answers that were written
// before the server read its end, and then the connection ends (EOF to
// the peer, Closed with io.EOF): the server does not wait on it.
func TestHalfClosedPeer(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	s, addr := serve(t, h, nil)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	var b []byte
	for i := range 3 {
		b = append(b, frame(uint64(i), "half").B...)
	}
	_, err = c.Write(b)
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	require.NoError(t, err, "the server ends the connection")
	require.Zero(t, len(got)%(transport.HeaderSize+len("half")), "whole answers only: %d bytes", len(got))
	require.ErrorIs(t, recvErr(t, ctx, h.closed), io.EOF)
	require.Empty(t, s.Conns())
}

// TestPayloadLimitBoundary: a body of exactly MaxPayload bytes is served;
// a header declaring one byte more ends that connection with
// ErrFrameTooLarge from the header alone, and other connections go on.
func TestPayloadLimitBoundary(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	_, addr := serve(t, h, &transport.Options{MaxPayload: 1024})
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, string(make([]byte, 1024)))
	require.Len(t, recv(t, ctx, h.frames), transport.HeaderSize+1024)

	over, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer over.Close()
	hdr := frame(3, string(make([]byte, 1025))).B[:transport.HeaderSize]
	_, err = over.Write(hdr) // and no body
	require.NoError(t, err)
	err = recvErr(t, ctx, h.closed)
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	require.ErrorContains(t, err, "body of 1025 bytes, limit 1024")
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = over.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server closed the connection")
	politeRoundTrip(t, polite, "after")
	require.Contains(t, string(recv(t, ctx, h.frames)), "after")
}

// TestPartialFramesCostBounded: peers that each declare the largest body
// allowed (8 MiB), send 100 bytes of it and stop cost the server what
// arrived and a read buffer, not what was declared: 80-120 KiB each here
// (the 32 KiB read buffer, the frame's first 64 KiB step, two goroutines,
// the client's socket), asserted under 256 KiB, 1/32 of the declared 8 MiB,
// until FrameTimeout cuts them; a polite connection is served meanwhile.
func TestPartialFramesCostBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 connections")
	}
	const n = 200
	s, addr := serve(t, echoHandler{}, &transport.Options{FrameTimeout: time.Minute})
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, "warm")

	start := frame(1, "").B
	binary.BigEndian.PutUint32(start[12:16], transport.DefaultMaxPayload)
	start = append(start, make([]byte, 100)...)
	before := memInUse()
	for range n {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write(start)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return len(s.Conns()) == n+1 }, 10*time.Second, time.Millisecond)
	politeRoundTrip(t, polite, "meanwhile")
	per := (int64(memInUse()) - int64(before)) / n
	t.Logf("%d connections stopped within an 8 MiB frame: %d bytes each (heap and stacks, server and client sockets)", n, per)
	require.Less(t, per, int64(256<<10))
}
