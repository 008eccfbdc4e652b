package transport_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
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
	_, stallAddr := serve(t, echoHandler{}, &transport.Options{Budget: shared, FrameTimeout: stallTimeout})
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

// TestBudgetWakesOnlyWhoFits: 100 connections wait for room for 512 KiB
// frames while 15 stalled ones hold an 8 MiB budget. A polite peer's 500
// small round trips release memory a thousand times, and wake none of the
// waiting connections: their frames do not fit in what each release
// gives back. (Every release used to wake every waiting connection, to
// try again and wait again: 50,000 wake-ups here, about 12 times the CPU
// of each polite call with 1,000 waiting.) Once the stalled peers go,
// each waiting connection is woken once, when its frame fits, first come
// first served, and the budget returns to zero.
func TestBudgetWakesOnlyWhoFits(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 115 connections")
	}
	const (
		waiting = 100
		body    = 512 << 10
		limit   = 8 << 20
	)
	s, addr := serve(t, echoHandler{}, &transport.Options{FrameTimeout: stallTimeout, MaxMemory: limit, MaxMemoryPerIP: limit, MaxPayload: 1 << 20})
	b := s.Budget()
	fit := limit / (transport.HeaderSize + body)
	start := append(header(1, body), make([]byte, 1000)...)
	var stalled, waiters []net.Conn
	defer func() {
		for _, c := range append(stalled, waiters...) {
			c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = c.Write(start)
		require.NoError(t, err)
		return c
	}
	for range fit {
		stalled = append(stalled, dial())
	}
	require.Eventually(t, func() bool { return b.Used() == fit*(transport.HeaderSize+body) }, 20*time.Second, time.Millisecond)
	for range waiting {
		waiters = append(waiters, dial())
	}
	require.Eventually(t, func() bool { return s.Throttled() == waiting }, 20*time.Second, time.Millisecond)

	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	for i := range 500 {
		politeRoundTrip(t, polite, fmt.Sprintf("call %d", i))
	}
	require.Zero(t, transport.Wakes(b), "connections woken for room that their frames do not fit in")

	for _, c := range stalled {
		c.Close()
	}
	// Each waiting frame is read once room is made for it: the whole
	// frame is sent for the echo to come back.
	rest := make([]byte, body-1000)
	var wg sync.WaitGroup
	errs := make(chan error, waiting)
	for i, c := range waiters {
		wg.Go(func() {
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, err := c.Write(rest)
			if err == nil {
				_, err = io.ReadFull(c, make([]byte, transport.HeaderSize+body))
			}
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, uint64(waiting), transport.Wakes(b), "each waiting connection woken once")
	for _, c := range waiters {
		c.Close()
	}
	require.Eventually(t, func() bool { return b.Used() == 0 }, 10*time.Second, time.Millisecond, "frames not given back")
}

// TestBudgetWaitersNotStuckBehindLarger: a 250 KiB frame that began to
// wait for room after a 900 KiB one is read as soon as there is room for
// it, though not for the larger one (smallest first: a waiting frame is
// never stuck behind a larger one that does not fit), and the 900 KiB one
// is read once enough of the rest drains.
func TestBudgetWaitersNotStuckBehindLarger(t *testing.T) {
	ctx := testCtx(t)
	h := newRecorder(false)
	s, addr := serve(t, h, &transport.Options{FrameTimeout: stallTimeout, MaxMemory: 2 << 20, MaxMemoryPerIP: 2 << 20, MaxPayload: 1 << 20})
	b := s.Budget()
	dial := func(id uint64, body int, whole bool) net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		f := header(id, body)
		if whole {
			f = append(f, make([]byte, body)...)
		}
		go func() { _, _ = c.Write(f) }() // a large frame waits in TCP
		return c
	}
	held := 0
	var stalls []net.Conn
	for i, body := range []int{1000 << 10, 300 << 10, 600 << 10} {
		stalls = append(stalls, dial(uint64(10+i), body, false))
		held += transport.HeaderSize + body
		require.Eventually(t, func() bool { return b.Used() == held }, 10*time.Second, time.Millisecond)
	}
	dial(1, 900<<10, true)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond)
	dial(2, 250<<10, true)
	require.Eventually(t, func() bool { return s.Throttled() == 2 }, 10*time.Second, time.Millisecond)

	// Room for the 250 KiB frame only: it is read.
	stalls[1].Close()
	got := recv(t, ctx, h.frames)
	require.Equal(t, uint64(2), binary.BigEndian.Uint64(got[4:12]), "the 250 KiB frame waits behind the 900 KiB one")
	require.Equal(t, uint64(1), transport.Wakes(b))
	// Room for the 900 KiB one.
	stalls[2].Close()
	got = recv(t, ctx, h.frames)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(got[4:12]))
	require.Equal(t, uint64(2), transport.Wakes(b))
}

// TestBudgetWaitersChurn: 60 connections send frames of 100 to 900 KiB at
// once into a 2 MiB budget, and every other one closes as soon as it has
// written, wherever it is then: read, waiting for room, first in line, or
// just granted room. Every one that stays gets its echo (a waiter that
// leaves lets those behind it in), and the budget returns to zero.
func TestBudgetWaitersChurn(t *testing.T) {
	s, addr := serve(t, echoHandler{}, &transport.Options{FrameTimeout: stallTimeout, MaxMemory: 2 << 20, MaxMemoryPerIP: 2 << 20, MaxPayload: 1 << 20})
	b := s.Budget()
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		body := (100 + (i*137)%800) << 10
		leaves := i%2 == 1
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			f := append(header(uint64(i), body), make([]byte, body)...)
			if leaves {
				_, _ = c.Write(f[:transport.HeaderSize+body/2])
				return
			}
			if _, err := c.Write(f); err != nil {
				errs <- fmt.Errorf("conn %d: %w", i, err)
				return
			}
			if _, err := io.ReadFull(c, make([]byte, len(f))); err != nil {
				errs <- fmt.Errorf("conn %d (%d KiB): no echo: %w", i, body>>10, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Eventually(t, func() bool { return b.Used() == 0 }, 10*time.Second, time.Millisecond, "frames not given back")
	t.Logf("throttled %d times, woken with room %d times", s.Throttled(), transport.Wakes(b))
}

// TestBudgetReservesForLongWaiter: four peers keep sending 200 KiB frames,
// which the handler holds until the test releases them, one at a time,
// into a 1 MiB budget (five fit); a fifth peer's 900 KiB frame waits for
// room. Each release makes room for a 200 KiB frame, never for the large
// one, and a 200 KiB frame is always waiting: smallest first, the large
// one would wait for as long as they keep coming. Once it has waited a
// tenth of its FrameTimeout (300 ms here), the budget is reserved for it:
// no other frame that waits is read until it fits, the held frames drain
// and it is read, while the others still have frames to send.
func TestBudgetReservesForLongWaiter(t *testing.T) {
	const medium, large = 200 << 10, 900 << 10
	k := keeper{kept: make(chan *transport.Buffer, 64)}
	s, addr := serve(t, k, &transport.Options{MaxMemory: 1 << 20, MaxMemoryPerIP: 1 << 20, MaxPayload: large, FrameTimeout: 3 * time.Second})
	b := s.Budget()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range 4 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		wg.Go(func() {
			defer c.Close()
			f := wholeFrame(uint64(i), medium)
			for range 10000 {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Write(f); err != nil {
					return
				}
			}
		})
		wg.Go(func() {
			<-stop
			c.Close() // ends a write that waits in TCP
		})
	}
	require.Eventually(t, func() bool { return len(k.kept) == 5 }, 10*time.Second, time.Millisecond, "five 200 KiB frames held")

	big, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer big.Close()
	go func() { _, _ = big.Write(wholeFrame(99, large)) }() // waits in TCP
	require.Eventually(t, func() bool {
		for _, c := range s.Conns() {
			if c.RemoteAddr().String() == big.LocalAddr().String() {
				return c.Throttled()
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the 900 KiB frame waits")

	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	released := 0
	for done := false; !done; {
		select {
		case f := <-k.kept:
			done = len(f.B) == transport.HeaderSize+large
			f.Release()
			released++
		case <-timeout.C:
			t.Fatalf("the 900 KiB frame was not read while 200 KiB frames kept coming (%d read and released) %s", released, transport.BudgetState(b))
		}
	}
	t.Logf("the 900 KiB frame was read after %d frames were released", released)
	require.NotZero(t, transport.Reservations(b))
}

// TestReservationLetsSmallFramesThrough: while the budget is reserved
// for a 600 KiB frame that waits, a peer that holds memory (its own
// 600 KiB frame, kept by the handler) still has its small frames read
// and echoed when they fit, as a heartbeat must be: the reservation holds
// back only frames over 4 KiB. (Holding back every frame stopped the
// heartbeats of such connections, and their peers took them for dead.)
func TestReservationLetsSmallFramesThrough(t *testing.T) {
	k := keeper{kept: make(chan *transport.Buffer, 2)}
	s, addr := serve(t, k, &transport.Options{MaxMemory: 1 << 20, MaxPayload: 600 << 10, FrameTimeout: 300 * time.Millisecond})
	b := s.Budget()
	holder, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.Write(wholeFrame(1, 600<<10))
	require.NoError(t, err)
	var first *transport.Buffer
	select {
	case first = <-k.kept:
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's frame was not read")
	}
	defer first.Release()

	waiter, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer waiter.Close()
	go func() { _, _ = waiter.Write(wholeFrame(2, 600<<10)) }() // waits in TCP
	require.Eventually(t, func() bool { return transport.Reservations(b) == 1 }, 10*time.Second, time.Millisecond,
		"the budget is reserved for the waiting frame")
	politeRoundTrip(t, holder, "heartbeat")
	require.Equal(t, uint64(1), s.Throttled(), "only the large frame waited")
}

// smallKeeper hands every frame to kept (the test releases them).
type smallKeeper struct{ kept chan *transport.Buffer }

func (k smallKeeper) Serve(_ *transport.Conn, f *transport.Buffer) { k.kept <- f }

func (smallKeeper) Closed(*transport.Conn, error) {}

// TestSmallFramesDoNotStarveReservation: 150 connections each have a
// 4000-byte frame held by the handler (about 600 KiB of a 1 MiB budget),
// and a 600 KiB frame waits until the budget is reserved for it. Then,
// again and again, one small frame is released and its connection sends
// another: frames of up to 4 KiB still go during a reservation (a
// heartbeat must), and before, each took the room the release made, so
// the reserved frame never fitted (passed over 1,000 times here). Now
// the small frames charged during a reservation are bounded (64 KiB of
// this budget); after that they wait with the rest, the held ones drain,
// the reserved frame is read, and then the small ones that waited.
func TestSmallFramesDoNotStarveReservation(t *testing.T) {
	const n, small, large = 150, 4000, 600 << 10
	k := smallKeeper{kept: make(chan *transport.Buffer, 2*n)}
	s, addr := serve(t, k, &transport.Options{MaxMemory: 1 << 20, MaxMemoryPerIP: 1 << 20, MaxPayload: large, FrameTimeout: time.Second})
	b := s.Budget()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		conns[i] = c
		_, err = c.Write(frame(uint64(i), strings.Repeat("s", small)).B)
		require.NoError(t, err)
	}
	var held []*transport.Buffer
	defer func() {
		for _, f := range held {
			f.Release()
		}
	}()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for len(held) < n {
		select {
		case f := <-k.kept:
			held = append(held, f)
		case <-timeout.C:
			t.Fatalf("%d small frames read of %d", len(held), n)
		}
	}
	big, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer big.Close()
	go func() { _, _ = big.Write(wholeFrame(n, large)) }() // waits in TCP
	require.Eventually(t, func() bool { return transport.Reservations(b) == 1 }, 10*time.Second, time.Millisecond,
		"the budget is reserved for the large frame: %s", transport.BudgetState(b))

	passed := 0
	for {
		select {
		case f := <-k.kept:
			if len(f.B) == transport.HeaderSize+large {
				f.Release()
				t.Logf("the reserved frame was read after %d small frames were released", passed)
				return
			}
			held = append(held, f)
			continue
		default:
		}
		require.Less(t, passed, 1000, "the reserved frame was passed over by %d small frames: %s", passed, transport.BudgetState(b))
		if len(held) == 0 {
			select {
			case f := <-k.kept:
				held = append(held, f)
			case <-timeout.C:
				t.Fatalf("nothing held and the reserved frame not read: %s", transport.BudgetState(b))
			}
			continue
		}
		f := held[0]
		held = held[1:]
		id := binary.BigEndian.Uint64(f.B[4:12])
		f.Release()
		passed++
		// Its connection sends another small frame: it is read, or it
		// waits (Throttled counts the waits).
		before := s.Throttled()
		_, err := conns[id].Write(frame(id, strings.Repeat("s", small)).B)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(k.kept) > 0 || s.Throttled() > before }, 10*time.Second, time.Millisecond,
			"the small frame was neither read nor throttled: %s", transport.BudgetState(b))
	}
}
