package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []exchange.Header{
		{Request: true, TwoWay: true, Serializer: 27, ID: 1, Length: 581},
		{Request: true, Event: true, ID: 1<<64 - 1},
		{Status: status.ServerBusy, Serializer: 16, ID: 42, Length: 1<<32 - 1},
		{Event: true, Status: status.OK},
	} {
		var b [exchange.HeaderSize]byte
		h.Put(b[:])
		require.Equal(t, []byte{0xda, 0xbb}, b[:2])
		got, err := exchange.ParseHeader(b[:])
		require.NoError(t, err)
		require.Equal(t, h, got)
	}
	var b [exchange.HeaderSize]byte
	(&exchange.Header{Request: true, TwoWay: true, Event: true, Serializer: 27}).Put(b[:])
	require.Equal(t, byte(0x80|0x40|0x20|27), b[2])
	_, err := exchange.ParseHeader(b[:15])
	require.Error(t, err)
	b[0] = 0xca
	_, err = exchange.ParseHeader(b[:])
	require.ErrorContains(t, err, "bad magic")
}

// echo answers with the request body; "block" waits on release; "panic"
// panics; "big:N" answers N bytes.
type echo struct {
	release  chan struct{}
	started  chan struct{}
	ctxEnded chan error
}

func newEcho() *echo {
	return &echo{release: make(chan struct{}), started: make(chan struct{}, 100), ctxEnded: make(chan error, 100)}
}

func (e *echo) Handle(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
	body := string(req.Body)
	switch {
	case body == "block":
		e.started <- struct{}{}
		select {
		case <-e.release:
		case <-ctx.Done():
		}
	case body == "waitctx":
		e.started <- struct{}{}
		<-ctx.Done()
		e.ctxEnded <- ctx.Err()
	case body == "panic":
		panic("boom")
	case body == "notfound":
		return nil, fmt.Errorf("%w: no such thing", status.ErrServiceNotFound)
	case len(body) > 4 && body[:4] == "big:":
		var n int
		fmt.Sscanf(body[4:], "%d", &n)
		f := exchange.NewFrame()
		f.B = append(f.B, make([]byte, n)...)
		return f, nil
	}
	f := exchange.NewFrame()
	f.B = append(f.B, req.Body...)
	return f, nil
}

func request(body string) *transport.Buffer {
	f := exchange.NewFrame()
	f.B = append(f.B, body...)
	return f
}

// serve starts a server with h on a free port; it is closed at the end of the test.
func serve(t testing.TB, h exchange.Handler, opts *exchange.Options) (*exchange.Server, string) {
	s, err := exchange.NewServer(h, opts)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s, l.Addr().String()
}

func dial(t testing.TB, addr string, opts *exchange.Options) *exchange.Client {
	c, err := exchange.Dial(testCtx(t), addr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func call(ctx context.Context, c *exchange.Client, body string) (string, error) {
	resp, err := c.Call(ctx, 0, 27, request(body))
	if err != nil {
		return "", err
	}
	defer resp.Release()
	h, err := exchange.ParseHeader(resp.B)
	if err != nil {
		return "", err
	}
	if h.Serializer != 27 || h.Request {
		return "", fmt.Errorf("bad response header %+v", h)
	}
	return string(exchange.Body(resp)), nil
}

// echoes calls c with body and says whether the echo provider answered
// it: an error when the call fails or its answer is not body.
func echoes(ctx context.Context, c *exchange.Client, body string) error {
	got, err := call(ctx, c, body)
	if err == nil && got != body {
		err = fmt.Errorf("got %q, want %q", got, body)
	}
	return err
}

// echoFromMany has callers goroutines on each client of cs make calls
// calls each, of bodies "g/i" (g the caller, i the call), all at once; a
// caller stops at its first call that does not echo its body, and that
// error fails the test.
func echoFromMany(t *testing.T, ctx context.Context, cs []*exchange.Client, callers, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(cs)*callers)
	for _, c := range cs {
		for g := range callers {
			wg.Go(func() {
				for i := range calls {
					if err := echoes(ctx, c, fmt.Sprintf("%d/%d", g, i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCallAndGo(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	got, err := call(ctx, c, "hello")
	require.NoError(t, err)
	require.Equal(t, "hello", got)

	futs := make([]*exchange.Future, 50)
	for i := range futs {
		futs[i] = c.Go(ctx, time.Second, 27, request(fmt.Sprint(i)))
	}
	for i, f := range futs {
		<-f.Done()
		resp, err := f.Result()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(exchange.Body(resp)))
		resp.Release()
		_, err = f.Result()
		require.Error(t, err, "the frame is handed out once")
	}
	require.Zero(t, c.Pending())
}

func TestConcurrentCallsShareOneConnection(t *testing.T) {
	ctx := testCtx(t)
	s, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	echoFromMany(t, ctx, []*exchange.Client{c}, 100, 20)
	require.Equal(t, 1, s.Conns())
}

func TestTimeoutAndLateResponse(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := call(short, c, "block")
	require.ErrorIs(t, err, status.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, c.Pending())

	// The timeout argument alone bounds the call too.
	_, err = c.Call(ctx, 20*time.Millisecond, 27, request("block"))
	require.ErrorIs(t, err, status.ErrTimeout)

	close(h.release)
	require.Eventually(t, func() bool { return c.Late() == 2 }, 5*time.Second, time.Millisecond)
	got, err := call(ctx, c, "after")
	require.NoError(t, err)
	require.Equal(t, "after", got)
}

func TestCancelledCall(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := call(cctx, c, "block")
		errc <- err
	}()
	<-h.started
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, status.ErrTimeout)

	fut := c.Go(cctx, 0, 27, request("x"))
	_, err = fut.Result()
	require.Error(t, err)
	close(h.release)
}

func TestGoTimeout(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	fut := c.Go(ctx, 20*time.Millisecond, 27, request("block"))
	_, err := fut.Result()
	require.ErrorIs(t, err, status.ErrTimeout)
	close(h.release)
}

func TestServerBusy(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{MaxConcurrent: 2})
	c := dial(t, addr, nil)
	results := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call(ctx, c, "block")
			results <- err
		}()
	}
	<-h.started
	<-h.started
	_, err := call(ctx, c, "more")
	require.ErrorIs(t, err, status.ErrServerBusy)
	var se *status.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, status.ServerBusy, se.Code)
	require.Equal(t, uint64(1), s.Busy())
	close(h.release)
	require.NoError(t, <-results)
	require.NoError(t, <-results)
	got, err := call(ctx, c, "again")
	require.NoError(t, err)
	require.Equal(t, "again", got)
}

func TestHandlerPanicAnswersThatCallerOnly(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	_, err := call(ctx, c, "panic")
	require.ErrorIs(t, err, status.ErrServerError)
	require.NotContains(t, err.Error(), "boom", "the panic value stays on the provider")
	got, err := call(ctx, c, "fine")
	require.NoError(t, err)
	require.Equal(t, "fine", got)
}

func TestHandlerErrorStatus(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	_, err := call(ctx, c, "notfound")
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	require.ErrorContains(t, err, "no such thing")
}

func TestPayloadLimits(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), &exchange.Options{MaxPayload: 1024})
	c := dial(t, addr, &exchange.Options{MaxPayload: 1024})
	_, err := call(ctx, c, string(make([]byte, 2000)))
	require.ErrorIs(t, err, status.ErrPayloadTooLarge)
	require.ErrorContains(t, err, "2000")
	_, err = call(ctx, c, "big:5000")
	require.ErrorIs(t, err, status.ErrPayloadTooLarge)
	require.ErrorContains(t, err, "5000")
	got, err := call(ctx, c, "big:1000")
	require.NoError(t, err)
	require.Len(t, got, 1000)
}

func TestClosedClientFailsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, "block")
		errc <- err
	}()
	<-h.started
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-errc, status.ErrClosed)
	_, err := call(ctx, c, "x")
	require.ErrorIs(t, err, status.ErrClosed)
	_, err = c.Go(ctx, 0, 27, request("x")).Result()
	require.ErrorIs(t, err, status.ErrClosed)
	require.False(t, c.Available())
	require.NoError(t, c.Close())
	close(h.release)
}

// TestDeadPeerDetected: a peer that accepts frames but never answers is
// found dead by the heartbeat, and every pending call fails at once with
// ErrConnLost (long before the calls' own deadline).
func TestDeadPeerDetected(t *testing.T) {
	ctx := testCtx(t)
	x, y := net.Pipe()
	defer y.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := y.Read(buf); err != nil {
				return
			}
		}
	}()
	const hb = 50 * time.Millisecond
	c := exchange.NewClient(x, &exchange.Options{Heartbeat: hb})
	defer c.Close()
	const n = 10
	errs := make(chan error, n)
	start := time.Now()
	for range n {
		go func() {
			_, err := c.Call(ctx, 0, 27, request("x"))
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		require.ErrorIs(t, err, status.ErrConnLost)
		require.NotErrorIs(t, err, status.ErrTimeout)
	}
	t.Logf("dead peer detected after %v (heartbeat %v)", time.Since(start), hb)
	require.False(t, c.Available())
	_, err := call(ctx, c, "after")
	require.ErrorIs(t, err, status.ErrClosed)
}

// TestLateTickAsksBeforeDead: a client's heartbeat goroutine that was not
// run for longer than the dead time (2.5 heartbeats: a machine loaded with
// other work, a pause of the process) does not take its live peer as dead
// at its first tick after the pause: it sends a heartbeat, the answer
// keeps the connection. A peer that never answers that heartbeat is still
// found dead, 1.5 heartbeats after it was sent.
func TestLateTickAsksBeforeDead(t *testing.T) {
	ctx := testCtx(t)
	ticks := make(chan time.Time)
	exchange.SetHeartbeatTicks(t, ticks)
	const hb = 20 * time.Millisecond
	_, addr := serve(t, newEcho(), &exchange.Options{Heartbeat: time.Hour})
	c := dial(t, addr, &exchange.Options{Heartbeat: hb})
	start := exchange.LastRead(c)
	time.Sleep(3 * hb) // the pause: no tick is delivered in it
	ticks <- time.Now()
	require.Eventually(t, func() bool { return exchange.LastRead(c).After(start) }, 10*time.Second, time.Millisecond, "the heartbeat was answered")
	ticks <- time.Now() // handled once the one before was: the channel has no buffer
	ticks <- time.Now()
	require.True(t, c.Available(), "a live peer taken as dead")
	got, err := call(ctx, c, "alive")
	require.NoError(t, err)
	require.Equal(t, "alive", got)

	// A peer that reads and never answers, ticks of its own.
	ticks = make(chan time.Time)
	exchange.SetHeartbeatTicks(t, ticks)
	x, y := net.Pipe()
	defer y.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := y.Read(buf); err != nil {
				return
			}
		}
	}()
	d := exchange.NewClient(x, &exchange.Options{Heartbeat: hb})
	defer d.Close()
	time.Sleep(3 * hb)
	// The ticks carry their own times: the client judges by them, so how
	// late this goroutine or the client's is run does not matter.
	at := time.Now()
	ticks <- at // asks
	ticks <- at.Add(hb / 2)
	require.True(t, d.Available(), "taken as dead before its heartbeat had 1.5 intervals to be answered")
	ticks <- at.Add(2 * hb) // the heartbeat's 1.5 intervals passed unanswered
	require.Eventually(t, func() bool { return !d.Available() }, 10*time.Second, time.Millisecond, "a silent peer kept")
	_, err = call(ctx, d, "after")
	require.ErrorIs(t, err, status.ErrClosed)
}

func TestHeartbeatKeepsIdleConnection(t *testing.T) {
	ctx := testCtx(t)
	opts := &exchange.Options{Heartbeat: 200 * time.Millisecond}
	s, addr := serve(t, newEcho(), opts)
	c := dial(t, addr, opts)
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, time.Millisecond)
	// Idle for several heartbeat intervals: neither side drops the connection.
	require.Never(t, func() bool { return !c.Available() || s.Conns() != 1 }, 1200*time.Millisecond, 10*time.Millisecond)
	got, err := call(ctx, c, "alive")
	require.NoError(t, err)
	require.Equal(t, "alive", got)
}

func TestServerClosesSilentConnection(t *testing.T) {
	s, addr := serve(t, newEcho(), &exchange.Options{Heartbeat: 20 * time.Millisecond})
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, time.Millisecond)
	// raw never sends anything, not even heartbeats.
	require.Eventually(t, func() bool { return s.Conns() == 0 }, 5*time.Second, 5*time.Millisecond)
}

func TestShutdownAnnouncesReadOnly(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	inflight := make(chan error, 1)
	go func() { inflight <- echoes(ctx, c, "block") }()
	<-h.started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	require.Eventually(t, c.ReadOnly, 5*time.Second, time.Millisecond)
	require.False(t, c.Available())
	_, err := call(ctx, c, "new")
	require.ErrorIs(t, err, status.ErrReadOnly)
	// The call in progress finishes, then the server closes.
	close(h.release)
	require.NoError(t, <-inflight)
	require.NoError(t, <-shut)
	<-c.Done()
}

func TestShutdownDeadline(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	go func() { _, _ = call(ctx, c, "block") }()
	<-h.started
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Shutdown(short), context.DeadlineExceeded)
}

func TestGarbageClosesThatConnectionOnly(t *testing.T) {
	ctx := testCtx(t)
	s, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Write([]byte("\x00\x01garbage garbage garbage"))
	require.NoError(t, err)
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = raw.Read(make([]byte, 1))
	require.Error(t, err, "the server closed the garbage connection")
	got, err := call(ctx, c, "ok")
	require.NoError(t, err)
	require.Equal(t, "ok", got)
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, time.Millisecond)
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []exchange.Options{{MaxPayload: -1}, {Heartbeat: -1}, {MaxConcurrent: -1}} {
		_, err := exchange.NewServer(newEcho(), &o)
		require.Error(t, err)
		_, err = exchange.Dial(testCtx(t), "127.0.0.1:1", &o)
		require.Error(t, err)
	}
}

func TestDialFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = exchange.Dial(testCtx(t), addr, nil)
	require.ErrorIs(t, err, status.ErrDial)
}

// TestTimeoutRacesResponse hammers calls whose deadlines fall around their
// response time: every call ends exactly once, with its response or
// ErrTimeout, nothing stays pending, and every response that found no
// call was counted late.
func TestTimeoutRacesResponse(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), &exchange.Options{MaxConcurrent: 10000})
	c := dial(t, addr, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, timedOut := 0, 0
	for g := range 50 {
		wg.Go(func() {
			for i := range 100 {
				d := time.Duration((g*100+i)%50) * 50 * time.Microsecond
				want := fmt.Sprint(g, i)
				resp, err := c.Call(ctx, d+time.Microsecond, 27, request(want))
				mu.Lock()
				switch {
				case err == nil:
					if string(exchange.Body(resp)) != want {
						t.Errorf("got %q, want %q", exchange.Body(resp), want)
					}
					resp.Release()
					ok++
				case errors.Is(err, status.ErrTimeout):
					timedOut++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 5000, ok+timedOut)
	require.Zero(t, c.Pending())
	// Every timed-out request is answered later, and counted.
	require.Eventually(t, func() bool { return c.Late() == uint64(timedOut) }, 5*time.Second, time.Millisecond)
	t.Logf("%d answered, %d timed out", ok, timedOut)
}

func TestHandlerContextEndsWithConnection(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c, err := exchange.Dial(ctx, addr, nil)
	require.NoError(t, err)
	go func() { _, _ = call(ctx, c, "waitctx") }()
	<-h.started
	require.NoError(t, c.Close())
	select {
	case err := <-h.ctxEnded:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("the handler's context was not cancelled")
	}
}

// TestOverloadPushesBack fills a small pool and queue: the calls beyond
// them wait (the server stops reading their connection) and none is
// answered "busy"; once the handlers are released every call succeeds.
// The pool never runs more than Workers handlers.
func TestOverloadPushesBack(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{Workers: 2, Queue: 2})
	c := dial(t, addr, nil)
	const n = 20
	results := make(chan error, n)
	for range n {
		go func() { results <- echoes(ctx, c, "block") }()
	}
	<-h.started
	<-h.started
	// 2 running, 2 queued, 1 held by the paused reader; the rest wait in
	// the client's queue and in TCP.
	require.Eventually(t, func() bool { return s.Paused() == 1 && s.Held() == 5 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 2, s.Workers())
	require.Equal(t, 0, len(h.started), "only the workers' handlers may start")
	require.Zero(t, s.Busy())
	close(h.release)
	for range n {
		require.NoError(t, <-results)
	}
	require.Zero(t, s.Busy())
	require.NotZero(t, s.Pauses())
	require.LessOrEqual(t, s.Workers(), 2)
	require.Eventually(t, func() bool { return s.Paused() == 0 && s.Held() == 0 }, 10*time.Second, time.Millisecond)
}

// TestPausedConnectionStaysAlive pauses a connection for many heartbeat
// intervals: the server's heartbeats on it keep the client from taking the
// server as dead, and the server does not take the paused client as idle.
func TestPausedConnectionStaysAlive(t *testing.T) {
	ctx := testCtx(t)
	// Long enough that a loaded machine still runs each side's heartbeat
	// goroutine in time.
	const hb = 200 * time.Millisecond
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{Workers: 1, Queue: 1, Heartbeat: hb})
	c := dial(t, addr, &exchange.Options{Heartbeat: hb})
	const n = 4
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := call(ctx, c, "block")
			results <- err
		}()
	}
	<-h.started
	require.Eventually(t, func() bool { return s.Paused() == 1 }, 10*time.Second, time.Millisecond)
	// 5 keepalives span at least 4 heartbeat intervals, more than the 2.5
	// the client waits before it gives up on a silent server.
	require.Eventually(t, func() bool { return s.KeepAlives() >= 5 }, 30*time.Second, time.Millisecond)
	require.NoError(t, c.Err())
	require.Equal(t, 1, s.Conns())
	require.Equal(t, 1, s.Paused())
	close(h.release)
	for range n {
		require.NoError(t, <-results)
	}
	require.NoError(t, c.Err())
}

// TestCloseWaitsForRunningHandler: Close cancels a running handler's
// context and waits for it to return (it returns at once here), however
// the request was run: by the goroutine that read it (the reading handed
// on or not) or by a worker. Close returning before it did left the
// handler running after the server was closed, and a goroutine counted in
// the server's WaitGroup after Close began waiting for it (a race).
func TestCloseWaitsForRunningHandler(t *testing.T) {
	ctx := testCtx(t)
	for _, conns := range []int{1, 4} {
		t.Run(fmt.Sprint(conns, " connections"), func(t *testing.T) {
			var started, ended atomic.Int64
			h := exchange.HandlerFunc(func(hctx context.Context, _ *exchange.Request) (*transport.Buffer, error) {
				defer ended.Add(1)
				started.Add(1)
				<-hctx.Done()
				return nil, hctx.Err()
			})
			s, err := exchange.NewServer(h, &exchange.Options{Workers: 2})
			require.NoError(t, err)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = s.Serve(l)
			}()
			called := make(chan error, conns)
			for range conns {
				c := dial(t, l.Addr().String(), nil)
				go func() { _, err := call(ctx, c, "x"); called <- err }()
			}
			require.Eventually(t, func() bool { return started.Load() == int64(min(conns, 2)) && s.Held() == conns }, 10*time.Second, time.Millisecond)
			require.NoError(t, s.Close())
			require.Equal(t, started.Load(), ended.Load(), "handlers still running after Close returned")
			// Abandoned: the queued requests, never run; none that ran.
			require.Equal(t, uint64(int64(conns)-started.Load()), s.Abandoned())
			<-served
			for range conns {
				require.Error(t, <-called)
			}
		})
	}
}

// TestShutdownAbandonsStuckHandler: a handler that ignores its context
// does not hold Shutdown past its deadline; the request is counted as
// abandoned.
func TestShutdownAbandonsStuckHandler(t *testing.T) {
	ctx := testCtx(t)
	stuck := make(chan struct{})
	started := make(chan struct{}, 1)
	ended := make(chan struct{})
	h := exchange.HandlerFunc(func(context.Context, *exchange.Request) (*transport.Buffer, error) {
		defer close(ended)
		started <- struct{}{}
		<-stuck // ignores its context
		return exchange.NewFrame(), nil
	})
	s, addr := serve(t, h, &exchange.Options{Workers: 1, Queue: 1})
	t.Cleanup(func() { <-ended }) // after the server's cleanup: stuck is closed below
	c := dial(t, addr, nil)
	called := make(chan error, 2)
	for range 2 { // one runs, one waits in the queue
		go func() { _, err := call(ctx, c, "x"); called <- err }()
	}
	<-started
	require.Eventually(t, func() bool { return s.Held() == 2 }, 10*time.Second, time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := s.Shutdown(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "abandoned 2 requests")
	require.Equal(t, uint64(2), s.Abandoned())
	for range 2 {
		require.Error(t, <-called)
	}
	close(stuck)
}

// TestMixedTimeouts: calls with different timeouts, from the timeout
// argument or from their contexts, sent in no order of deadline to a
// provider that does not answer, each end with a timeout error that names
// its own timeout and source; then nothing stays pending or timed, and a
// call after them is answered.
func TestMixedTimeouts(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{MaxConcurrent: 1000})
	c := dial(t, addr, nil)
	timeouts := []time.Duration{300, 20, 150, 5, 80, 250, 40, 10, 200, 60, 120, 30}
	var wg sync.WaitGroup
	for i, ms := range timeouts {
		for _, byCtx := range []bool{false, true} {
			wg.Go(func() {
				d := ms * time.Millisecond
				cctx, timeout := ctx, d
				if byCtx {
					var cancel context.CancelFunc
					cctx, cancel = context.WithTimeout(ctx, d)
					defer cancel()
					timeout = time.Hour
				}
				_, err := c.Call(cctx, timeout, 27, request("block"))
				var te *status.TimeoutError
				if !errors.As(err, &te) {
					t.Errorf("call %d (%v, by context %v): %v, want a timeout", i, d, byCtx, err)
					return
				}
				if byCtx {
					if te.Source != status.SourceContext || te.Timeout > d || te.Timeout <= 0 {
						t.Errorf("call %d by context: timeout %v source %v, want at most %v from the context", i, te.Timeout, te.Source, d)
					}
				} else if te.Timeout != d || te.Source == status.SourceContext {
					t.Errorf("call %d: timeout %v source %v, want %v", i, te.Timeout, te.Source, d)
				}
			})
		}
	}
	wg.Wait()
	require.Zero(t, c.Pending())
	require.Zero(t, c.Timed())
	close(h.release)
	require.Eventually(t, func() bool { return c.Late() == uint64(2*len(timeouts)) }, 5*time.Second, time.Millisecond)
	got, err := call(ctx, c, "after")
	require.NoError(t, err)
	require.Equal(t, "after", got)
	require.Zero(t, c.Timed())
}

// TestAnsweredCallsLeaveNoDeadline: calls answered before their deadlines,
// cancelled, or failed by the connection's end leave nothing in the
// client's deadline heap.
func TestAnsweredCallsLeaveNoDeadline(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{MaxConcurrent: 1000})
	c := dial(t, addr, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				want := fmt.Sprint(g, "-", i)
				resp, err := c.Call(ctx, time.Duration(1+i%5)*time.Minute, 27, request(want))
				if err != nil {
					t.Error(err)
					return
				}
				if string(exchange.Body(resp)) != want {
					t.Errorf("got %q, want %q", exchange.Body(resp), want)
				}
				resp.Release()
			}
		})
	}
	wg.Wait()
	require.Zero(t, c.Timed())

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(cctx, time.Minute, 27, request("block"))
		errc <- err
	}()
	<-h.started
	require.Equal(t, 1, c.Timed())
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Zero(t, c.Timed())

	go func() {
		_, err := c.Call(ctx, time.Minute, 27, request("block"))
		errc <- err
	}()
	<-h.started
	require.Equal(t, 1, c.Timed())
	c.Close()
	require.ErrorIs(t, <-errc, status.ErrClosed)
	require.Zero(t, c.Timed())
	require.Zero(t, c.Pending())
	close(h.release)
}

// TestFuturesShareTheDeadlines: futures wait in the client's deadline heap
// beside synchronous calls; each ends at its own timeout, and an answered
// or closed one leaves the heap.
func TestFuturesShareTheDeadlines(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, &exchange.Options{MaxConcurrent: 1000})
	c := dial(t, addr, nil)
	long := c.Go(ctx, time.Hour, 27, request("block"))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, time.Minute, 27, request("block"))
		errc <- err
	}()
	short := []time.Duration{40 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond}
	futs := make([]*exchange.Future, len(short))
	for i, d := range short {
		futs[i] = c.Go(ctx, d, 27, request("block"))
	}
	for i, fut := range futs {
		_, err := fut.Result()
		var te *status.TimeoutError
		require.ErrorAs(t, err, &te, "future %d", i)
		require.Equal(t, short[i], te.Timeout, "future %d", i)
	}
	for range 2 + len(short) {
		<-h.started
	}
	require.Equal(t, 2, c.Timed(), "the hour-long future and the minute-long call")
	close(h.release)
	got, err := long.Result()
	require.NoError(t, err)
	require.Equal(t, "block", string(exchange.Body(got)))
	got.Release()
	require.NoError(t, <-errc)
	require.Zero(t, c.Timed())

	closing := c.Go(ctx, time.Hour, 27, request("waitctx"))
	<-h.started
	require.Equal(t, 1, c.Timed())
	c.Close()
	_, err = closing.Result()
	require.ErrorIs(t, err, status.ErrClosed)
	require.Zero(t, c.Timed())
	require.Zero(t, c.Pending())
}

// TestCallAtRunsFromItsStart: CallAt's timeout runs from the time it is
// given, not from when it is called.
func TestCallAtRunsFromItsStart(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	_, err := c.CallAt(ctx, time.Now().Add(-time.Hour), time.Minute, 27, request("block"))
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, time.Minute, te.Timeout)
	require.Zero(t, c.Pending())

	// Seen from a start an hour ahead, the context's deadline a minute
	// from now has passed.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(time.Minute))
	defer cancel()
	_, err = c.CallAt(dctx, time.Now().Add(time.Hour), 0, 27, request("block"))
	require.ErrorAs(t, err, &te)
	require.Equal(t, status.SourceContext, te.Source)

	resp, err := c.CallAt(ctx, time.Now(), time.Minute, 27, request("now"))
	require.NoError(t, err)
	require.Equal(t, "now", string(exchange.Body(resp)))
	resp.Release()
	close(h.release)
}
