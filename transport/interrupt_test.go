package transport_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// detacher records frames, and gives up reading with a frame whose body
// is "detach".
type detacher struct{ *recorder }

func (d detacher) Serve(c *transport.Conn, f *transport.Buffer) {
	if string(f.B[transport.HeaderSize:]) == "detach" {
		c.Detach()
	}
	d.recorder.Serve(c, f)
}

// Interrupt stops the goroutine that reads (its Resume returns true)
// while it waits for a frame, before it reads when nobody reads, and
// in the middle of a frame; frames are served whole, once, by whoever
// reads next.
func TestInterruptStopsReadingBetweenFrames(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := l.Accept()
		accepted <- nc
	}()
	rec := newRecorder(false)
	a, err := transport.Dial(ctx, l.Addr().String(), detacher{rec}, nil)
	require.NoError(t, err)
	peer := <-accepted
	require.NotNil(t, peer)
	write := func(b []byte) {
		t.Helper()
		_, err := peer.Write(b)
		require.NoError(t, err)
	}
	bytesOf := func(id uint64, body string) []byte {
		f := frame(id, body)
		defer f.Release()
		return append([]byte(nil), f.B...)
	}
	resume := func() chan bool {
		r := make(chan bool, 1)
		go func() { r <- a.Resume() }()
		return r
	}
	stopped := func(r chan bool) bool {
		t.Helper()
		select {
		case ok := <-r:
			return ok
		case <-ctx.Done():
			t.Fatal("Resume did not return")
			return false
		}
	}

	// The read loop gives the role up; a goroutine takes it.
	write(bytesOf(1, "detach"))
	require.Equal(t, "detach", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))
	r := resume()
	a.Interrupt() // waiting for a frame (or about to)
	require.True(t, stopped(r))
	require.Equal(t, uint64(1), transport.Interrupts(a))

	// A frame sent meanwhile is read by the next reader.
	write(bytesOf(2, "two"))
	r = resume()
	require.Equal(t, "two", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))

	// An Interrupt with nobody reading stops the next reader before it
	// reads: frame 3 waits for the one after.
	a.Interrupt()
	require.True(t, stopped(r))
	a.Interrupt()
	write(bytesOf(3, "three"))
	require.True(t, stopped(resume()))
	require.Empty(t, rec.frames, "stopped before reading")
	require.Equal(t, uint64(3), transport.Interrupts(a))
	r = resume()
	require.Equal(t, "three", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))

	// In the middle of a frame (or before it, if the reader has not read
	// its first part yet): it is served whole, once.
	four := bytesOf(4, "a frame sent in two parts")
	write(four[:10])
	a.Interrupt()
	write(four[10:])
	require.True(t, stopped(r))
	if len(rec.frames) == 0 {
		r = resume() // stopped before the frame
	} else {
		r = nil
	}
	require.Equal(t, four, recv(t, ctx, rec.frames))
	if r == nil {
		r = resume()
	}
	require.Empty(t, rec.frames)

	// The end of the connection ends the role: Resume returns false.
	require.NoError(t, peer.Close())
	require.False(t, stopped(r))
	require.Error(t, recvErr(t, ctx, rec.closed))
	require.NoError(t, a.Close())
}

// Interrupt stops a reader that waits for the rest of a frame at once,
// not when the frame's FrameTimeout (a minute here) passes: the next
// reader finishes the frame, which is served whole, once (stopped in its
// header, or in its body). The frame's FrameTimeout still bounds it
// across readers.
func TestInterruptWithinFrame(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for range 2 {
			nc, _ := l.Accept()
			accepted <- nc
		}
	}()
	rec := newRecorder(false)
	a, err := transport.Dial(ctx, l.Addr().String(), detacher{rec}, &transport.Options{FrameTimeout: time.Minute})
	require.NoError(t, err)
	peer := <-accepted
	require.NotNil(t, peer)
	write := func(b []byte) {
		t.Helper()
		_, err := peer.Write(b)
		require.NoError(t, err)
	}
	bytesOf := func(id uint64, body string) []byte {
		f := frame(id, body)
		defer f.Release()
		return append([]byte(nil), f.B...)
	}
	resume := func() chan bool {
		r := make(chan bool, 1)
		go func() { r <- a.Resume() }()
		return r
	}
	stopped := func(r chan bool) bool {
		t.Helper()
		select {
		case ok := <-r:
			return ok
		case <-ctx.Done():
			t.Fatal("Resume did not return")
			return false
		}
	}
	write(bytesOf(1, "detach"))
	require.Equal(t, "detach", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))

	// Frame x comes with the first part of big: once x is served, the
	// reader is within big (it needs more of it from the network).
	x := bytesOf(2, "x")
	big := bytesOf(3, string(make([]byte, 100<<10)))
	for _, cut := range []int{8, 16 + 50<<10} {
		write(append(append([]byte(nil), x...), big[:cut]...))
		r := resume()
		require.Equal(t, x, recv(t, ctx, rec.frames))
		a.Interrupt() // within big
		require.True(t, stopped(r))
		require.Empty(t, rec.frames)
		write(big[cut:])
		r = resume()
		require.Equal(t, big, recv(t, ctx, rec.frames))
		a.Interrupt()
		require.True(t, stopped(r))
		require.Empty(t, rec.frames)
	}

	// A peer that stops within a frame still meets the frame's bound
	// after a reader was stopped in it.
	short, err := transport.Dial(ctx, l.Addr().String(), detacher{rec}, &transport.Options{FrameTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	peer2 := <-accepted
	require.NotNil(t, peer2)
	defer peer2.Close()
	_, err = peer2.Write(append(bytesOf(4, "detach"), big[:100]...))
	require.NoError(t, err)
	require.Equal(t, "detach", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))
	r := make(chan bool, 1)
	go func() { r <- short.Resume() }()
	short.Interrupt() // within the frame, or before it
	require.True(t, stopped(r))
	go func() { r <- short.Resume() }()
	require.False(t, stopped(r), "the frame's bound ended the connection")
	require.ErrorIs(t, recvErr(t, ctx, rec.closed), transport.ErrSlowFrame)
	require.NoError(t, short.Close())

	r = resume()
	require.NoError(t, peer.Close())
	require.False(t, stopped(r))
	require.Error(t, recvErr(t, ctx, rec.closed))
	require.NoError(t, a.Close())
}
