package transport_test

import (
	"context"
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

// detached is a Conn (a) whose read loop has given the role up, dialled
// to a raw peer that the test writes frames with: the set-up of the
// Interrupt tests. rec records the frames a serves; the listener l
// accepts up to the number of connections asked for onto accepted (the
// first is peer).
type detached struct {
	t        *testing.T
	ctx      context.Context
	l        net.Listener
	accepted chan net.Conn
	rec      *recorder
	a        *transport.Conn
	peer     net.Conn
}

// startDetached dials a (detacher, opts) to a listener that accepts
// conns connections, and has the peer send a "detach" frame; it returns
// once that frame is served: nobody reads a's connection.
func startDetached(t *testing.T, ctx context.Context, conns int, opts *transport.Options) *detached {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	d := &detached{t: t, ctx: ctx, l: l, accepted: make(chan net.Conn, conns), rec: newRecorder(false)}
	go func() {
		for range conns {
			nc, _ := l.Accept()
			d.accepted <- nc
		}
	}()
	d.a, err = transport.Dial(ctx, l.Addr().String(), detacher{d.rec}, opts)
	require.NoError(t, err)
	d.peer = <-d.accepted
	require.NotNil(t, d.peer)
	d.write(rawFrame(1, "detach"))
	require.Equal(t, "detach", string(recv(t, ctx, d.rec.frames)[transport.HeaderSize:]))
	return d
}

// write sends b from the peer.
func (d *detached) write(b []byte) {
	d.t.Helper()
	_, err := d.peer.Write(b)
	require.NoError(d.t, err)
}

// resume runs a.Resume in a goroutine; the channel gets what it returns.
func (d *detached) resume() chan bool {
	r := make(chan bool, 1)
	go func() { r <- d.a.Resume() }()
	return r
}

// stopped waits for a Resume's result on r.
func (d *detached) stopped(r chan bool) bool {
	d.t.Helper()
	select {
	case ok := <-r:
		return ok
	case <-d.ctx.Done():
		d.t.Fatal("Resume did not return")
		return false
	}
}

// Interrupt stops the goroutine that reads (its Resume returns true)
// while it waits for a frame, before it reads when nobody reads, and
// in the middle of a frame; frames are served whole, once, by whoever
// reads next.
func TestInterruptStopsReadingBetweenFrames(t *testing.T) {
	ctx := testCtx(t)
	// The read loop gives the role up; a goroutine takes it.
	d := startDetached(t, ctx, 1, nil)
	a, peer, rec := d.a, d.peer, d.rec
	r := d.resume()
	a.Interrupt() // waiting for a frame (or about to)
	require.True(t, d.stopped(r))
	require.Equal(t, uint64(1), transport.Interrupts(a))

	// A frame sent meanwhile is read by the next reader.
	d.write(rawFrame(2, "two"))
	r = d.resume()
	require.Equal(t, "two", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))

	// An Interrupt with nobody reading stops the next reader before it
	// reads: frame 3 waits for the one after.
	a.Interrupt()
	require.True(t, d.stopped(r))
	a.Interrupt()
	d.write(rawFrame(3, "three"))
	require.True(t, d.stopped(d.resume()))
	require.Empty(t, rec.frames, "stopped before reading")
	require.Equal(t, uint64(3), transport.Interrupts(a))
	r = d.resume()
	require.Equal(t, "three", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))

	// In the middle of a frame (or before it, if the reader has not read
	// its first part yet): it is served whole, once.
	four := rawFrame(4, "a frame sent in two parts")
	d.write(four[:10])
	a.Interrupt()
	d.write(four[10:])
	require.True(t, d.stopped(r))
	if len(rec.frames) == 0 {
		r = d.resume() // stopped before the frame
	} else {
		r = nil
	}
	require.Equal(t, four, recv(t, ctx, rec.frames))
	if r == nil {
		r = d.resume()
	}
	require.Empty(t, rec.frames)

	// The end of the connection ends the role: Resume returns false.
	require.NoError(t, peer.Close())
	require.False(t, d.stopped(r))
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
	d := startDetached(t, ctx, 2, &transport.Options{FrameTimeout: time.Minute})
	a, peer, rec := d.a, d.peer, d.rec

	// Frame x comes with the first part of big: once x is served, the
	// reader is within big (it needs more of it from the network).
	x := rawFrame(2, "x")
	big := rawFrame(3, string(make([]byte, 100<<10)))
	for _, cut := range []int{8, 16 + 50<<10} {
		d.write(append(append([]byte(nil), x...), big[:cut]...))
		r := d.resume()
		require.Equal(t, x, recv(t, ctx, rec.frames))
		a.Interrupt() // within big
		require.True(t, d.stopped(r))
		require.Empty(t, rec.frames)
		d.write(big[cut:])
		r = d.resume()
		require.Equal(t, big, recv(t, ctx, rec.frames))
		a.Interrupt()
		require.True(t, d.stopped(r))
		require.Empty(t, rec.frames)
	}

	// A peer that stops within a frame still meets the frame's bound
	// after a reader was stopped in it.
	short, err := transport.Dial(ctx, d.l.Addr().String(), detacher{rec}, &transport.Options{FrameTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	peer2 := <-d.accepted
	require.NotNil(t, peer2)
	defer peer2.Close()
	_, err = peer2.Write(append(rawFrame(4, "detach"), big[:100]...))
	require.NoError(t, err)
	require.Equal(t, "detach", string(recv(t, ctx, rec.frames)[transport.HeaderSize:]))
	r := make(chan bool, 1)
	go func() { r <- short.Resume() }()
	short.Interrupt() // within the frame, or before it
	require.True(t, d.stopped(r))
	go func() { r <- short.Resume() }()
	require.False(t, d.stopped(r), "the frame's bound ended the connection")
	require.ErrorIs(t, recvErr(t, ctx, rec.closed), transport.ErrSlowFrame)
	require.NoError(t, short.Close())

	r = d.resume()
	require.NoError(t, peer.Close())
	require.False(t, d.stopped(r))
	require.Error(t, recvErr(t, ctx, rec.closed))
	require.NoError(t, a.Close())
}
