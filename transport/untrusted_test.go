package transport_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// serve starts a Server with opts and h on a free port.
func serve(t *testing.T, h transport.Handler, opts *transport.Options) (*transport.Server, string) {
	t.Helper()
	s := transport.NewServer(h, opts)
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return s, l.Addr().String()
}

// TestQueueBoundHoldsDuringBatch: while the writer is stuck writing a
// batch to a peer that does not read, that batch still counts against
// MaxQueue (it used to be forgotten the moment the writer took it, so about
// twice the limit could wait in memory).
func TestQueueBoundHoldsDuringBatch(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe()
	defer y.Close()
	h := newRecorder(false)
	c := transport.NewConn(x, h, &transport.Options{MaxQueue: 4 << 10, WriteBufferSize: 512})
	defer c.Close()
	require.NoError(t, c.Send(frame(0, string(make([]byte, 4<<10-transport.HeaderSize)))))
	// Read a little: the writer is now inside that batch, blocked.
	_, err := io.ReadFull(y, make([]byte, 16))
	require.NoError(t, err)
	accepted := 0
	for i := 1; i <= 16 && err == nil; i++ {
		if err = c.Send(frame(uint64(i), string(make([]byte, 1024)))); err == nil {
			accepted++
		}
	}
	require.ErrorIs(t, err, transport.ErrSlowPeer)
	require.Equal(t, 1, accepted, "one frame past the limit at most while 4 KiB are being written")
	require.ErrorIs(t, recvErr(t, ctx, h.closed), transport.ErrSlowPeer)
}

// TestSlowLoris: a peer that starts a frame and stops is cut off after
// FrameTimeout, also right after a whole frame (while the connection keeps
// its read buffer); a connection that is merely idle between frames is not,
// whether it never sent a frame or went quiet after one.
func TestSlowLoris(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	_, addr := serve(t, h, &transport.Options{FrameTimeout: 300 * time.Millisecond})

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	quiet, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer quiet.Close()
	_, err = quiet.Write(frame(5, "first").B)
	require.NoError(t, err)
	require.Contains(t, string(recv(t, ctx, h.frames)), "first")
	_, err = io.ReadFull(quiet, make([]byte, transport.HeaderSize+len("first")))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		whole   int // whole frames before the partial one
		partial []byte
	}{
		"half a header":                {0, frame(1, "body").B[:7]},
		"half a body":                  {0, frame(2, "0123456789").B[:20]},
		"half a header after a frame":  {1, frame(4, "body").B[:7]},
		"half a body after two frames": {2, frame(4, "0123456789").B[:20]},
	} {
		t.Run(name, func(t *testing.T) {
			slow, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer slow.Close()
			var b []byte
			for range tc.whole {
				b = append(b, frame(3, "whole").B...)
			}
			_, err = slow.Write(append(b, tc.partial...))
			require.NoError(t, err)
			for range tc.whole {
				require.Contains(t, string(recv(t, ctx, h.frames)), "whole")
			}
			require.ErrorIs(t, recvErr(t, ctx, h.closed), transport.ErrSlowFrame)
			_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadFull(slow, make([]byte, tc.whole*(transport.HeaderSize+len("whole"))))
			require.NoError(t, err, "the whole frames were answered")
			_, err = slow.Read(make([]byte, 1))
			require.ErrorIs(t, err, io.EOF, "the server closed the slow connection")
		})
	}
	// The idle and the quiet connections, older than all, still work.
	for _, c := range []net.Conn{idle, quiet} {
		_, err = c.Write(frame(7, "still here").B)
		require.NoError(t, err)
		require.Contains(t, string(recv(t, ctx, h.frames)), "still here")
		got := make([]byte, transport.HeaderSize+len("still here"))
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Contains(t, string(got), "still here")
	}
}

// TestMaxConns: connections over the limit are closed at once and counted;
// once one closes, a new one is served.
func TestMaxConns(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(true)
	s, addr := serve(t, h, &transport.Options{MaxConns: 3})
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		open = append(open, c)
	}
	require.Eventually(t, func() bool { return len(s.Conns()) == 3 }, 5*time.Second, time.Millisecond)
	over, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer over.Close()
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = over.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "closed at once")
	require.Equal(t, uint64(1), s.Refused())
	require.Len(t, s.Conns(), 3)

	open[0].Close()
	require.Error(t, recvErr(t, ctx, h.closed))
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(frame(1, "in").B)
	require.NoError(t, err)
	require.Contains(t, string(recv(t, ctx, h.frames)), "in")
}

// TestIdleConnectionsCheap: 2,000 idle connections cost the server (and
// the test's own client sockets) at most 16 KiB each in heap and stacks:
// read and write buffers are taken only while data flows.
func TestIdleConnectionsCheap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 connections")
	}
	const n = 2000
	s, addr := serve(t, echoHandler{}, nil)
	// Warm the pools and the server with one call.
	warm, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer warm.Close()
	_, err = warm.Write(frame(1, "warm").B)
	require.NoError(t, err)
	_, err = io.ReadFull(warm, make([]byte, transport.HeaderSize+4))
	require.NoError(t, err)

	before := memInUse()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool { return len(s.Conns()) == n+1 }, 30*time.Second, 10*time.Millisecond)
	after := memInUse()
	per := (int64(after) - int64(before)) / n
	t.Logf("%d idle connections: %d bytes each (heap and stacks, server and client sockets)", n, per)
	require.LessOrEqual(t, per, int64(16<<10), fmt.Sprintf("%d bytes per idle connection", per))
}

func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// echoHandler echoes frames and records nothing.
type echoHandler struct{}

func (echoHandler) Serve(c *transport.Conn, f *transport.Buffer) { _ = c.Send(f) }
func (echoHandler) Closed(*transport.Conn, error)                {}

// TestSmallFramesChargedWhole: MaxQueue bounds the memory that frames
// waiting for a peer that does not read keep, not only their bytes: each
// small frame keeps its pooled buffer whole. Counted by their bytes, 26-byte
// frames in 1 KiB buffers kept about 40 times MaxQueue.
func TestSmallFramesChargedWhole(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe() // nothing reads y
	defer y.Close()
	h := newRecorder(false)
	const maxQueue, writeBuffer = 1 << 20, 1 << 10
	c := transport.NewConn(x, h, &transport.Options{MaxQueue: maxQueue, WriteBufferSize: writeBuffer})
	defer c.Close()
	before := memInUse()
	accepted := 0
	var err error
	for i := uint64(0); i < 1<<20 && err == nil; i++ {
		f := frame(i, "0123456789")
		if cap(f.B) < 1024 {
			// A pooled buffer of an earlier read can be smaller: each
			// frame here keeps 1 KiB, as a fresh pooled buffer does.
			f.B = append(make([]byte, 0, 1024), f.B...)
		}
		if err = c.SendWait(ctx, time.Now().Add(time.Millisecond), f); err == nil {
			accepted++
		}
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "the queue filled")
	require.NoError(t, c.Err(), "SendWait does not close the connection")
	grown := int64(memInUse()) - int64(before)
	t.Logf("%d frames of %d bytes queued: %d KiB in use (MaxQueue %d KiB)", accepted, transport.HeaderSize+10, grown>>10, maxQueue>>10)
	require.Less(t, grown, int64(2*maxQueue), "%d frames queued", accepted)
	require.Greater(t, accepted, 100, "the queue takes small frames")
	// Each frame keeps 1 KiB or more: the count shows the bound that the
	// heap, blurred by the pooled buffers of earlier tests (or runs under
	// -count), does not always show. The writer's buffer (1 KiB here, a
	// copy of the frames it took before the pipe blocked) holds a few more.
	most := maxQueue/1024 + writeBuffer/(transport.HeaderSize+10) + 1
	require.LessOrEqual(t, accepted, most, "frames queued, each keeping 1 KiB or more")
}
