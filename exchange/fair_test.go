package exchange_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// greedy keeps n requests in flight on one raw connection, writing a new
// one as each answer arrives, until closed.
type greedy struct {
	conn     net.Conn
	answered atomic.Int64
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func startGreedy(t *testing.T, addr string, n int, body string) *greedy {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	g := &greedy{conn: conn, stop: make(chan struct{})}
	free := make(chan struct{}, n)
	for range n {
		free <- struct{}{}
	}
	g.wg.Go(func() {
		w := bufio.NewWriterSize(conn, 64<<10)
		frame := make([]byte, exchange.HeaderSize+len(body))
		copy(frame[exchange.HeaderSize:], body)
		for id := uint64(1); ; id++ {
			select {
			case <-free:
			default:
				if w.Flush() != nil {
					return
				}
				select {
				case <-free:
				case <-g.stop:
					return
				}
			}
			h := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: id, Length: uint32(len(body))}
			h.Put(frame)
			if _, err := w.Write(frame); err != nil {
				return
			}
		}
	})
	g.wg.Go(func() {
		r := bufio.NewReaderSize(conn, 64<<10)
		var hdr [exchange.HeaderSize]byte
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[12:16]))); err != nil {
				return
			}
			if hdr[2]&0x20 != 0 { // an event (heartbeat)
				continue
			}
			g.answered.Add(1)
			free <- struct{}{}
		}
	})
	t.Cleanup(g.close)
	return g
}

func (g *greedy) close() {
	g.once.Do(func() {
		close(g.stop)
		g.conn.Close()
		g.wg.Wait()
	})
}

// latencies makes n calls on each of two clients, one call at a time and
// taking turns (a, b, a, b, ...), and returns each client's latencies,
// sorted. Both are measured in the same window, so a stall of a machine
// busy with other work falls on either alike.
func latencies(t *testing.T, ctx context.Context, a, b *exchange.Client, n int) (la, lb []time.Duration) {
	la, lb = make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		for _, m := range []struct {
			c   *exchange.Client
			lat []time.Duration
		}{{a, la}, {b, lb}} {
			start := time.Now()
			got, err := call(ctx, m.c, "polite")
			m.lat[i] = time.Since(start)
			require.NoError(t, err)
			require.Equal(t, "polite", got)
		}
	}
	slices.Sort(la)
	slices.Sort(lb)
	return la, lb
}

// TestGreedyConnectionDoesNotStarvePolite: one connection keeps 1,000
// requests in flight against a provider with 16 workers, so that nearly
// all of them wait in the queue; another connection makes one call at a
// time. Workers take the connections in turn, so the polite calls wait
// for about one request, not for the greedy connection's whole queue: the
// polite p99 stays within a few times the p99 of the same calls to a
// second, unloaded provider, measured in the same window. (Before fair
// queueing it was 40-120 times.) The handler waits 5 ms, like a method
// waiting for a database, so the ratio measures the queue, not the CPU.
func TestGreedyConnectionDoesNotStarvePolite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const workers, inFlight, calls = 16, 1000, 200
	h := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		time.Sleep(5 * time.Millisecond)
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	s, addr := serve(t, h, &exchange.Options{Workers: workers})
	// The reference: a provider alike, in the same process, that only
	// the polite calls reach.
	_, refAddr := serve(t, h, &exchange.Options{Workers: workers})
	polite, ref := dial(t, addr, nil), dial(t, refAddr, nil)
	latencies(t, ctx, polite, ref, 10) // warm up

	g := startGreedy(t, addr, inFlight, "greedy")
	// Nearly all of the greedy requests are held: queued behind the
	// workers.
	require.Eventually(t, func() bool { return s.Held() >= inFlight-workers }, 30*time.Second, time.Millisecond)
	before, start := g.answered.Load(), time.Now()
	la, lr := latencies(t, ctx, polite, ref, calls)
	answered, window := g.answered.Load()-before, time.Since(start)
	g.close()
	// A greedy request waits, on average, for the greedy connection's
	// whole queue: inFlight requests at the rate they were answered in
	// the same window. Without fair queueing a polite call waits for that
	// queue too.
	greedyWait := time.Duration(float64(window) * inFlight / float64(max(answered, 1)))
	loaded, reference := la[calls*99/100], lr[calls*99/100]
	t.Logf("polite p50 %v, p99 %v beside a connection with %d requests in flight; p50 %v, p99 %v to the unloaded reference in the same window (p99 %.1fx); the greedy connection had %d answers meanwhile, its requests waited %v on average",
		la[calls/2], loaded, inFlight, lr[calls/2], reference, float64(loaded)/float64(reference), answered, greedyWait)
	require.Greater(t, answered, int64(calls), "the greedy connection kept its share")
	// The polite calls wait for about one request (their median: the
	// reference's plus about 5 ms), not for the greedy connection's queue:
	// without fair queueing their median would be that queue's wait. (The
	// median, not the p99: a p99 of 200 calls is their third slowest, and
	// under load a few calls stalled by the machine took more than half of
	// the greedy wait, which is an average.)
	require.LessOrEqual(t, la[calls/2], greedyWait/4, "the polite calls waited for the greedy queue")
	// Their p99 stays within a few times the reference's p99 (40-120x
	// before fair queueing). The reference is measured in the same window,
	// taking turns with the loaded calls, not before the load: an unloaded
	// p99 measured earlier made the ratio depend on how busy the machine
	// was at each moment (0.9-7.4x in 8 runs under -race beside other
	// tests; 0.5-3.7x against the reference, in 22 runs).
	require.LessOrEqual(t, loaded, 20*reference, "the polite calls against the unloaded reference")
}

// TestConnectionsTakeTurns: with one worker and a full queue, a request
// from a connection with nothing queued still gets a place (its
// connection is not paused), and it runs after at most one request of the
// connection that filled the queue, not after all of them.
func TestConnectionsTakeTurns(t *testing.T) {
	ctx := testCtx(t)
	step := make(chan struct{})
	started := make(chan string, 64)
	h := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		started <- string(req.Body)
		<-step
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	const queue = 8
	s, addr := serve(t, h, &exchange.Options{Workers: 1, Queue: queue})
	a, b := dial(t, addr, nil), dial(t, addr, nil)
	const n = queue + 4
	results := make(chan error, n+1)
	for i := range n {
		go func() {
			_, err := call(ctx, a, fmt.Sprint("a", i))
			results <- err
		}()
	}
	// 1 running, the queue full of a's requests, a paused with one more.
	require.Eventually(t, func() bool { return s.Held() == queue+2 && s.Paused() == 1 }, 10*time.Second, time.Millisecond)
	go func() {
		_, err := call(ctx, b, "b")
		results <- err
	}()
	// b's request is queued at once: b is not paused.
	require.Eventually(t, func() bool { return s.Held() == queue+3 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 1, s.Paused())

	var order []string
	for range n + 1 {
		order = append(order, <-started)
		step <- struct{}{}
	}
	for range n + 1 {
		require.NoError(t, <-results)
	}
	at := slices.Index(order, "b")
	t.Logf("order: %v", order)
	// The one running when b arrived, at most one more of a's, then b.
	require.LessOrEqual(t, at, 2, "b waited for %d of a's requests", at)
	require.Zero(t, s.Busy())
}

// heartbeater is a raw connection that sends only two-way heartbeats and
// counts the answers.
type heartbeater struct {
	conn     net.Conn
	answered atomic.Int64
	done     chan struct{}
}

func dialHeartbeater(t *testing.T, addr string) *heartbeater {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	hb := &heartbeater{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(hb.done)
		var hdr [exchange.HeaderSize]byte
		for {
			if _, err := io.ReadFull(conn, hdr[:]); err != nil {
				return
			}
			h, err := exchange.ParseHeader(hdr[:])
			if err != nil || !h.Event || h.Request || h.Length != 0 {
				return
			}
			hb.answered.Add(1)
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-hb.done
	})
	return hb
}

func (hb *heartbeater) beat(id uint64) error {
	var b [exchange.HeaderSize]byte
	h := exchange.Header{Request: true, TwoWay: true, Event: true, ID: id}
	h.Put(b[:])
	_, err := hb.conn.Write(b[:])
	return err
}

// closed reports whether the server closed the connection.
func (hb *heartbeater) closed() bool {
	select {
	case <-hb.done:
		return true
	default:
		return false
	}
}

// TestIdleTimeoutSeparateFromHeartbeat: with a heartbeat interval of an
// hour and an idle time of 600 ms, a connection that sends nothing is
// closed after the idle time, and one that sends only heartbeats is kept,
// until it stops sending them.
func TestIdleTimeoutSeparateFromHeartbeat(t *testing.T) {
	const idle = 600 * time.Millisecond
	s, addr := serve(t, newEcho(), &exchange.Options{Heartbeat: time.Hour, IdleTimeout: idle})
	silent := dialHeartbeater(t, addr)
	require.Eventually(t, silent.closed, 10*time.Second, time.Millisecond)
	beating := dialHeartbeater(t, addr)
	// Heartbeats every 60 ms for 5 idle times: never closed. (The idle
	// time is 600 ms, not less, so that a test goroutine descheduled for
	// a few hundred ms on a loaded machine still beats in time.)
	for id := uint64(1); id <= 50; id++ {
		require.NoError(t, beating.beat(id))
		time.Sleep(idle / 10) // the peer's pace, not a synchronisation
	}
	require.False(t, beating.closed())
	require.Eventually(t, func() bool { return beating.answered.Load() == 50 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 1, s.Conns())
	// Silent from now on: closed.
	require.Eventually(t, beating.closed, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return s.Conns() == 0 }, 10*time.Second, time.Millisecond)
}

// TestHeartbeatsAreNotRequests: with the one worker busy, the queue full
// and MaxConcurrent reached, a peer that sends only heartbeats gets every
// one answered, none answered busy, and they take no place: Held and Busy
// do not move.
func TestHeartbeatsAreNotRequests(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{Workers: 1, Queue: 1, MaxConcurrent: 2})
	c := dial(t, addr, nil)
	results := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call(ctx, c, "block")
			results <- err
		}()
	}
	<-h.started
	require.Eventually(t, func() bool { return s.Held() == 2 }, 10*time.Second, time.Millisecond)
	hb := dialHeartbeater(t, addr)
	const n = 200
	for id := uint64(1); id <= n; id++ {
		require.NoError(t, hb.beat(id))
	}
	require.Eventually(t, func() bool { return hb.answered.Load() == n }, 10*time.Second, time.Millisecond)
	require.Equal(t, 2, s.Held())
	require.Zero(t, s.Busy())
	require.Zero(t, s.Paused())
	close(h.release)
	for range 2 {
		require.NoError(t, <-results)
	}
}

// TestClosedConnectionsQueueDropped: the requests a connection has queued
// when it closes are dropped, not run (their callers were told the
// connection was lost and may have retried elsewhere), and counted.
func TestClosedConnectionsQueueDropped(t *testing.T) {
	ctx := testCtx(t)
	var ran atomic.Int64
	started, release := make(chan struct{}, 1), make(chan struct{})
	h := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		ran.Add(1)
		if string(req.Body) == "block" {
			started <- struct{}{}
			<-release
		}
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	s, addr := serve(t, h, &exchange.Options{Workers: 1})
	b := dial(t, addr, nil)
	blocked := make(chan error, 1)
	go func() {
		_, err := call(ctx, b, "block")
		blocked <- err
	}()
	<-started // the only worker is taken
	a, err := exchange.Dial(ctx, addr, nil)
	require.NoError(t, err)
	const n = 3
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := call(ctx, a, "queued")
			results <- err
		}()
	}
	require.Eventually(t, func() bool { return s.Held() == n+1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, a.Close())
	for range n {
		require.ErrorIs(t, <-results, status.ErrClosed)
	}
	require.Eventually(t, func() bool { return s.Dropped() == n && s.Held() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-blocked)
	require.Eventually(t, func() bool { return s.Held() == 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(1), ran.Load(), "only the blocking request ran")
}

// The goroutine that reads a request runs it and an idle worker reads on
// (leader/follower): with one worker, many connections and concurrent
// callers on each, every call is answered and no more than one handler
// ever runs at once.
func TestInlineRunsKeepTheWorkerBound(t *testing.T) {
	ctx := testCtx(t)
	var running, most atomic.Int32
	h := exchange.HandlerFunc(func(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	s, addr := serve(t, h, &exchange.Options{Workers: 1})
	const conns, callers, calls = 4, 4, 50
	cs := make([]*exchange.Client, conns)
	for i := range cs {
		cs[i] = dial(t, addr, nil)
	}
	echoFromMany(t, ctx, cs, callers, calls)
	require.Equal(t, int32(1), most.Load(), "handlers at once")
	require.LessOrEqual(t, s.Workers(), 1)
	// A request is counted out after its answer is sent.
	require.Eventually(t, func() bool { return s.Held() == 0 }, 10*time.Second, time.Millisecond)
}

// A request runs on the goroutine that read it while its connection waits
// unread, but only for a moment: a request that blocks does not hold up
// the next ones on its connection, and slow requests one after the other
// are all answered.
func TestBlockedRequestDoesNotHoldItsConnection(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{Workers: 4})
	c := dial(t, addr, nil)
	passBlocked(ctx, t, h, c, 20)

	slow := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		time.Sleep(2 * time.Millisecond)
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	_, addr = serve(t, slow, &exchange.Options{Workers: 4})
	c = dial(t, addr, nil)
	for i := range 40 {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
	}
	require.LessOrEqual(t, s.Workers(), 4)
}

// Requests that arrive together on one connection run one after another
// on the goroutine that reads it while they are quick; one that blocks
// among them does not hold up those read behind it: they are all
// answered while it waits.
func TestRequestsReadTogetherPassABlockedOne(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{Workers: 4})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))

	// 5 quick requests, the blocking one (id 6), 20 quick ones: one write.
	const n, blockID = 26, 6
	var out []byte
	for id := uint64(1); id <= n; id++ {
		body := fmt.Sprint("q", id)
		if id == blockID {
			body = "block"
		}
		frame := make([]byte, exchange.HeaderSize+len(body))
		h := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: id, Length: uint32(len(body))}
		h.Put(frame)
		copy(frame[exchange.HeaderSize:], body)
		out = append(out, frame...)
	}
	_, err = conn.Write(out)
	require.NoError(t, err)

	r := bufio.NewReader(conn)
	answer := func() (uint64, string) {
		h, body, err := readFrame(r)
		require.NoError(t, err)
		require.False(t, h.Request)
		require.Equal(t, status.OK, h.Status)
		return h.ID, string(body)
	}
	seen := map[uint64]bool{}
	for range n - 1 {
		id, body := answer()
		require.NotEqual(t, uint64(blockID), id, "the blocked request answered before its release")
		require.Equal(t, fmt.Sprint("q", id), body)
		require.False(t, seen[id], "request %d answered twice", id)
		seen[id] = true
	}
	close(h.release)
	id, body := answer()
	require.Equal(t, uint64(blockID), id)
	require.Equal(t, "block", body)
}

// The watcher that reads on for a request that runs long looks only at
// connections that ran a request on their reader lately, and forgets one
// that ran none for a while (100 ms): a connection that comes back after
// that is watched again. Here another connection's calls keep the watcher
// at work while the first is quiet, and then the first blocks: its next
// calls are still answered.
func TestQuietConnectionWatchedAgain(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{Workers: 8})
	a, b := dial(t, addr, nil), dial(t, addr, nil)
	got, err := call(ctx, a, "first")
	require.NoError(t, err)
	require.Equal(t, "first", got)

	// a is quiet for longer than the watcher remembers it, while b's
	// calls keep the watcher looking.
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		_, err := call(ctx, b, "b")
		require.NoError(t, err)
	}
	passBlocked(ctx, t, h, a, 5)
}

// Request.Queued tells a handler whether the request went to a worker
// (so that its time may have run out before it started) or ran at once
// on the goroutine that read it.
func TestRequestQueuedOnlyWhenHandedToAWorker(t *testing.T) {
	ctx := testCtx(t)
	e := newEcho()
	var mu sync.Mutex
	queued := map[string]bool{}
	h := exchange.HandlerFunc(func(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
		mu.Lock()
		queued[string(req.Body)] = req.Queued
		mu.Unlock()
		return e.Handle(ctx, req)
	})
	s, addr := serve(t, h, &exchange.Options{Workers: 1})
	c1, c2 := dial(t, addr, nil), dial(t, addr, nil)
	got, err := call(ctx, c1, "alone")
	require.NoError(t, err)
	require.Equal(t, "alone", got)
	blocked := make(chan error, 1)
	go func() {
		_, err := call(ctx, c1, "block")
		blocked <- err
	}()
	<-e.started // it holds the only worker's place
	waited := make(chan error, 1)
	go func() {
		_, err := call(ctx, c2, "behind")
		waited <- err
	}()
	require.Never(t, func() bool { return len(waited) > 0 }, 20*time.Millisecond, time.Millisecond,
		"one worker: the second request waits")
	// The server has read it (it holds both) before the first ends: else,
	// on a loaded machine, it could arrive after and run at once.
	require.Eventually(t, func() bool { return s.Held() == 2 }, 10*time.Second, time.Millisecond, "the server holds both requests")
	close(e.release)
	require.NoError(t, <-blocked)
	require.NoError(t, <-waited)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]bool{"alone": false, "block": false, "behind": true}, queued)
}

// The server lends one Request per connection to a handler at a time:
// requests of one connection that run at once each see their own, unchanged
// until their handler returns.
func TestRequestsOfOneConnectionDoNotShareTheirRequest(t *testing.T) {
	ctx := testCtx(t)
	var bad atomic.Int32
	h := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		id, body := req.ID, string(req.Body)
		for range 3 {
			time.Sleep(100 * time.Microsecond)
			if req.ID != id || string(req.Body) != body {
				bad.Add(1)
			}
		}
		f := exchange.NewFrame()
		f.B = append(f.B, req.Body...)
		return f, nil
	})
	_, addr := serve(t, h, &exchange.Options{Workers: 8})
	c := dial(t, addr, nil)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			got, err := call(ctx, c, fmt.Sprint("r", i))
			if err != nil || got != fmt.Sprint("r", i) {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	require.Zero(t, bad.Load())
}

// After the wall clock is set back (Now's wall time then runs ahead of
// time.Now's), a request blocked on the goroutine that read it is still
// passed by those read behind it: the watcher measures a run's age on the
// monotonic clock alone. When it compared a Now-derived wall time with
// time.Now, a step back of an hour kept the connection's reading held for
// that hour.
func TestBlockedRequestPassedAfterWallClockStep(t *testing.T) {
	exchange.StepWall(t, time.Hour)
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{Workers: 4})
	c := dial(t, addr, nil)
	passBlocked(ctx, t, h, c, 1)
}

// passBlocked sends a "block" call on c and waits until h runs it; the n
// calls sent on c behind it must then be answered while it waits. It
// releases the blocked call at the end and requires that it ended well.
func passBlocked(ctx context.Context, t *testing.T, h *echo, c *exchange.Client, n int) {
	t.Helper()
	blocked := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, "block")
		blocked <- err
	}()
	<-h.started
	defer func() {
		close(h.release)
		require.NoError(t, <-blocked, "the blocked call")
	}()
	for i := range n {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err, "call %d, read behind a blocked one", i)
		require.Equal(t, fmt.Sprint(i), got)
	}
}
