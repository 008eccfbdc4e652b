package monitor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock advances by step on every reading.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) nanos() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t.UnixNano()
}

var errBoom = errors.New("boom")

func answer(err error) protocol.Invoker {
	return protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		if err != nil {
			return nil, err
		}
		return &protocol.Result{Value: "ok"}, nil
	}}
}

func TestCounts(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	clock := &fakeClock{t: time.Unix(0, 0)}
	m.now = clock.nanos
	f := m.Filter(Consumer)
	hello := &protocol.Invocation{Service: "demo.Greeter", Version: "1.0", Method: "SayHello"}

	for _, step := range []time.Duration{3 * time.Millisecond, 5 * time.Millisecond, time.Millisecond} {
		clock.step = step
		res, err := f.Invoke(ctx, hello, answer(nil))
		require.NoError(t, err)
		assert.Equal(t, "ok", res.Value)
	}
	clock.step = 2 * time.Millisecond
	_, err := f.Invoke(ctx, hello, answer(errBoom))
	assert.Same(t, errBoom, err, "errors pass through unchanged")

	snap := m.Snapshot()
	require.Len(t, snap, 1)
	assert.Equal(t, Stat{
		Side: Consumer, Service: "demo.Greeter", Version: "1.0", Method: "SayHello",
		Calls: 4, Successes: 3, Failures: 1, FailuresByKind: map[string]int64{KindOther: 1},
		Elapsed: 11 * time.Millisecond, MaxElapsed: 5 * time.Millisecond,
		Concurrent: 0, MaxConcurrent: 1,
	}, snap[0])
	assert.Equal(t, 2750*time.Microsecond, snap[0].AvgElapsed())
	assert.Equal(t, "consumer demo.Greeter:1.0.SayHello calls=4 ok=3 fail=1 avg=2.75ms max=5ms concurrent=0/1",
		snap[0].String())
	assert.Zero(t, Stat{}.AvgElapsed())
}

func TestKeysAndOrder(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	c, p := m.Filter(Consumer), m.Filter(Provider)
	calls := []struct {
		f   protocol.Filter
		inv protocol.Invocation
	}{
		{p, protocol.Invocation{Service: "b.Svc", Method: "X"}},
		{c, protocol.Invocation{Service: "a.Svc", Method: "Y"}},
		{c, protocol.Invocation{Service: "a.Svc", Method: "X"}},
		{p, protocol.Invocation{Service: "a.Svc", Method: "X"}},
		{c, protocol.Invocation{Service: "a.Svc", Group: "g", Method: "X"}},
		{c, protocol.Invocation{Service: "a.Svc", Method: "X"}},
	}
	for _, call := range calls {
		_, err := call.f.Invoke(ctx, &call.inv, answer(nil))
		require.NoError(t, err)
	}
	var got []string
	for _, s := range m.Snapshot() {
		got = append(got, string(s.Side)+" "+protocol.ServiceKey(s.Service, s.Version, s.Group)+"."+s.Method+" "+strconv.FormatInt(s.Calls, 10))
	}
	assert.Equal(t, []string{
		"consumer a.Svc.X 2",
		"provider a.Svc.X 1",
		"consumer a.Svc.Y 1",
		"consumer g/a.Svc.X 1",
		"provider b.Svc.X 1",
	}, got)
}

func TestConcurrent(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	f := m.Filter(Provider)
	const n = 5
	entered := make(chan struct{})
	release := make(chan struct{})
	blocking := protocol.InvokerFunc{F: func(ctx context.Context, _ *protocol.Invocation) (*protocol.Result, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return &protocol.Result{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	inv := &protocol.Invocation{Service: "s", Method: "m"}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { _, _ = f.Invoke(ctx, inv, blocking) })
	}
	for range n {
		<-entered
	}
	s := m.Snapshot()[0]
	assert.EqualValues(t, n, s.Calls)
	assert.EqualValues(t, n, s.Concurrent)
	assert.EqualValues(t, n, s.MaxConcurrent)
	assert.Zero(t, s.Successes+s.Failures)
	close(release)
	wg.Wait()
	s = m.Snapshot()[0]
	assert.EqualValues(t, 0, s.Concurrent)
	assert.EqualValues(t, n, s.MaxConcurrent)
	assert.EqualValues(t, n, s.Successes)
}

func TestPanicCountsAsFailure(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	f := m.Filter(Provider)
	panicky := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		panic("kaboom")
	}}
	assert.PanicsWithValue(t, "kaboom", func() {
		_, _ = f.Invoke(ctx, &protocol.Invocation{Service: "s", Method: "m"}, panicky)
	})
	s := m.Snapshot()[0]
	assert.EqualValues(t, 1, s.Calls)
	assert.EqualValues(t, 1, s.Failures)
	assert.EqualValues(t, 0, s.Concurrent)
}

func TestHammer(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	f := m.Filter(Consumer)
	methods := []string{"a", "b", "c", "d"}
	const goroutines, calls = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				inv := &protocol.Invocation{Service: "s", Method: methods[(g+i)%len(methods)]}
				var err error
				if i%5 == 0 {
					err = errBoom
				}
				_, _ = f.Invoke(ctx, inv, answer(err))
				if i%100 == 0 {
					_ = m.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	var total, ok, fail int64
	snap := m.Snapshot()
	require.Len(t, snap, len(methods))
	for _, s := range snap {
		total += s.Calls
		ok += s.Successes
		fail += s.Failures
		assert.Zero(t, s.Concurrent)
		assert.LessOrEqual(t, s.MaxConcurrent, int64(goroutines))
	}
	assert.EqualValues(t, goroutines*calls, total)
	assert.EqualValues(t, goroutines*calls/5, fail)
	assert.EqualValues(t, goroutines*calls*4/5, ok)
}

func TestNoAllocsPerCall(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	f := m.Filter(Consumer)
	res := &protocol.Result{}
	var next protocol.Invoker = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return res, nil }}
	inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"}
	_, _ = f.Invoke(ctx, inv, next) // first call adds the entry
	allocs := testing.AllocsPerRun(100, func() { _, _ = f.Invoke(ctx, inv, next) })
	assert.Zero(t, allocs)
}

func BenchmarkFilter(b *testing.B) {
	m := New()
	f := m.Filter(Consumer)
	res := &protocol.Result{}
	var next protocol.Invoker = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return res, nil }}
	ctx := context.Background()
	inv := &protocol.Invocation{Service: "demo.Greeter", Version: "1.0", Method: "SayHello"}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = f.Invoke(ctx, inv, next)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = f.Invoke(ctx, inv, next)
			}
		})
	})
}
