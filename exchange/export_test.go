package exchange

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/minidubbo/minidubbo/internal/readhook"
	"github.com/minidubbo/minidubbo/transport"
)

// Timed returns how many calls wait in the client's deadline heap.
func (c *Client) Timed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timed)
}

// SetHeartbeatTicks makes the clients started until t ends take their
// heartbeat ticks from ticks, and each tick's time as the time it is
// handled, so a test decides how far apart two ticks are however late
// either goroutine is run.
func SetHeartbeatTicks(t testing.TB, ticks <-chan time.Time) {
	oldTicks, oldClock := heartbeatTicks, heartbeatClock
	heartbeatTicks = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	heartbeatClock = func(tick time.Time) time.Time { return tick }
	t.Cleanup(func() { heartbeatTicks, heartbeatClock = oldTicks, oldClock })
}

// LastRead returns when c last read a frame.
func LastRead(c *Client) time.Time { return c.conn.LastRead() }

// StepWall makes Now's wall time d ahead of the real wall clock, as after
// the wall clock was set back by d (an NTP step, a resumed VM) since the
// process started; Now's monotonic reading is unchanged. It edits the
// seconds kept in epoch's wall word (bits 30 to 62 when the Time carries a
// monotonic reading), so it fails the test if that layout ever changes.
// The shift is undone when the test ends.
func StepWall(t testing.TB, d time.Duration) {
	t.Helper()
	old := epoch
	w := (*uint64)(unsafe.Pointer(&epoch))
	*w += uint64(d/time.Second) << 30
	t.Cleanup(func() { epoch = old })
	if got := Now().Round(0).Sub(time.Now().Round(0)); got < d-time.Minute || got > d+time.Minute {
		t.Fatalf("StepWall: Now's wall time is %v from the wall clock, want %v: time.Time's layout changed", got, d)
	}
}

// AbortWhenRegistered makes every call prepared until t ends abort its
// client's connection with err after the call is registered and before its
// frame is queued, and wait (up to 10 s) until the client's Closed handler
// has run: the handler then ends the registered call, which was never sent.
func AbortWhenRegistered(t testing.TB, err error) {
	var closed sync.Map // *Client → chan struct{}, closed by its Closed handler
	testHookClosed = func(c *Client) {
		if ch, ok := closed.Load(c); ok {
			close(ch.(chan struct{}))
		}
	}
	testHookRegistered = func(c *Client) {
		ch, _ := closed.LoadOrStore(c, make(chan struct{}))
		c.mu.Lock()
		ran := c.err != nil
		c.mu.Unlock()
		if ran {
			return
		}
		c.conn.Abort(err)
		select {
		case <-ch.(chan struct{}):
		case <-time.After(10 * time.Second):
			t.Error("AbortWhenRegistered: the Closed handler did not run in 10 s")
		}
	}
	t.Cleanup(func() { testHookRegistered, testHookClosed = nil, nil })
}

// Inline returns how many requests their callers wrote themselves, without
// the connection's writer goroutine.
func (c *Client) Inline() uint64 { return c.inline.Load() }

// MaxIdleWorkers returns how many idle workers s keeps at most.
func MaxIdleWorkers(s *Server) int { return s.maxIdle }

// Led returns how many calls' callers read the connection themselves
// (their own responses among what they read).
func (c *Client) Led() uint64 { return c.led.Load() }

// KeepRoleFree makes the standby goroutines of the clients started until
// t ends never take a free reading role, but when their connection closes:
// they read only when handed the role. They still watch reading callers'
// contexts every tick.
func KeepRoleFree(t testing.TB) {
	old := standbyIdleTicks
	standbyIdleTicks = 1 << 30
	t.Cleanup(func() { standbyIdleTicks = old })
}

// Stops returns how many calls of c ended while their callers read the
// connection, otherwise than by their responses (deadline, context).
func (c *Client) Stops() uint64 { return c.stops.Load() }

// WatchAnswers makes the servers started until t ends report on the
// returned channel, for each request they answer, whether its response
// frame holds the request's frame (Request.KeepBody and spliced bytes)
// or the request's frame was released; the report is made before the
// response is sent. The channel holds 64 reports: read them.
func WatchAnswers(t testing.TB) <-chan bool {
	ch := make(chan bool, 64)
	testHookAnswered = func(_ Header, holds bool) { ch <- holds }
	t.Cleanup(func() { testHookAnswered = nil })
	return ch
}

// Parked reports whether c's standby goroutine has stopped looking at
// the role while a caller with no context to watch reads.
func (c *Client) Parked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

// HoldStandbyReads makes the standby goroutines of every client wait,
// each time one is about to read its connection, until release is
// called (or t ends); held gets a report as each begins to wait. Call it
// after the clients it is for are dialled, so that its cleanup (release)
// comes before their Close.
func HoldStandbyReads(t testing.TB) (held <-chan struct{}, release func()) {
	ch := make(chan struct{}, 16)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	h := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
		<-gate
	}
	testHookStandbyReads.Store(&h)
	t.Cleanup(func() {
		testHookStandbyReads.Store(nil)
		release()
	})
	return ch, release
}

// Reading is the transport's Conn.Reading of c's connection.
func (c *Client) Reading() transport.ReadProgress { return c.conn.Reading() }

// HoldTakenBytesWhen makes the first read of a connection this process
// made that takes bytes from its socket, where such reads are counted
// (on Linux: plain TCP, and under TLS for Dial's connections), and after
// which when (nil: any) reports true, wait after its read(2), before it
// counts them, until release is called (or t ends); held is closed once
// it waits. Call it after the clients it is for are dialled, so that its
// cleanup (release) comes before their Close.
func HoldTakenBytesWhen(t testing.TB, when func() bool) (held <-chan struct{}, release func()) {
	held, release, undo := readhook.Hold(when)
	t.Cleanup(undo)
	return held, release
}
