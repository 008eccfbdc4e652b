package transport_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// holdFirst hands the frames with id 1 to held (the test releases them)
// and echoes the others.
type holdFirst struct {
	held   chan *transport.Buffer
	closed chan error
}

func (h holdFirst) Serve(c *transport.Conn, f *transport.Buffer) {
	if binary.BigEndian.Uint64(f.B[4:12]) == 1 {
		h.held <- f
		return
	}
	_ = c.Send(f)
}

func (h holdFirst) Closed(_ *transport.Conn, err error) { h.closed <- err }

// TestThrottledFrameGetsItsFrameTimeout: a connection holds a small frame
// (its handler keeps it) while another server sharing the budget has it
// used up; the connection's next small frame, whose header came in two
// reads and whose body has not arrived, waits for memory longer than
// FrameTimeout. Once the first frame is released the
// waiting one is read as the one frame of a connection that holds
// nothing, and its peer, which sends the rest at once, is answered: the
// frame's FrameTimeout starts again after the server's wait, as it does
// when the frame fits, instead of the connection being closed as a slow
// peer (ErrSlowFrame).
func TestThrottledFrameGetsItsFrameTimeout(t *testing.T) {
	ctx := testCtx(t)
	const frameTimeout = 500 * time.Millisecond
	shared := transport.NewBudget(1 << 20)
	_, stallAddr := serve(t, echoHandler{}, &transport.Options{Budget: shared, FrameTimeout: time.Minute})
	h := holdFirst{held: make(chan *transport.Buffer, 1), closed: make(chan error, 1)}
	s, addr := serve(t, h, &transport.Options{Budget: shared, FrameTimeout: frameTimeout})

	stall, err := net.Dial("tcp", stallAddr)
	require.NoError(t, err)
	defer stall.Close()
	_, err = stall.Write(append(header(9, 1<<20-transport.HeaderSize), "part"...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return shared.Used() == 1<<20 }, 10*time.Second, time.Millisecond)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	second := frame(2, strings.Repeat("s", 2000)).B
	// Half of the second frame's header comes with the first frame: its
	// FrameTimeout starts before its header is read.
	_, err = c.Write(append(frame(1, "first").B, second[:8]...))
	require.NoError(t, err)
	var first *transport.Buffer
	select {
	case first = <-h.held:
	case <-ctx.Done():
		t.Fatal("the first frame was not read")
	}
	_, err = c.Write(second[8 : transport.HeaderSize+1])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond)
	// The wait for memory lasts longer than FrameTimeout: that length is
	// what this test is about.
	time.Sleep(2 * frameTimeout)
	first.Release()
	_, err = c.Write(second[transport.HeaderSize+1:])
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(second))
	if _, err = io.ReadFull(c, got); err != nil {
		t.Fatalf("the waiting frame was not answered (%v): the server closed the connection: %v", err, recvErr(t, ctx, h.closed))
	}
	require.Equal(t, second, got)
	select {
	case err := <-h.closed:
		t.Fatalf("closed: %v", err)
	default:
	}
}
