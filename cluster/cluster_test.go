package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStrategyTable(t *testing.T) {
	assert.Equal(t, []string{"broadcast", "failback", "failfast", "failover", "failsafe", "forking"}, Builtin().Names())
	_, err := New(NewStatic(), Options{Strategy: "failsome"})
	require.EqualError(t, err, `cluster: unknown strategy "failsome"; did you mean "failsafe"? (known: broadcast, failback, failfast, failover, failsafe, forking)`)
	_, err = New(NewStatic(), Options{LoadBalance: "rr"})
	require.ErrorContains(t, err, `loadbalance: unknown "rr" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`)
	_, err = New(nil, Options{})
	require.Error(t, err)
	_, err = New(NewStatic(), Options{Forks: -1})
	require.Error(t, err)
	_, err = New(NewStatic(), Options{Retries: -1})
	require.EqualError(t, err, "cluster: Retries -1 is negative (want 0 for no retries, or more; DefaultOptions has 2)")

	tb := Builtin()
	require.Error(t, tb.Register(Failover, func(Options) (Strategy, error) { return nil, nil }))
	require.NoError(t, tb.Register("first", func(Options) (Strategy, error) {
		return StrategyFunc(func(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
			l, err := c.Providers(inv)
			if err != nil {
				return nil, err
			}
			return c.Call(ctx, l[0], inv)
		}), nil
	}))
	fs := fakes(2)
	c := newCluster(t, static(fs), Options{Strategy: "first", Strategies: tb})
	_, err = c.Invoke(testCtx(t), invocation("m"))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, counts(fs))
}

func TestNoProvider(t *testing.T) {
	for _, s := range Builtin().Names() {
		c := newCluster(t, NewStatic(), Options{Strategy: s})
		_, err := c.Invoke(testCtx(t), invocation("SayHello"))
		if s == Failsafe || s == Failback {
			// failsafe swallows it; failback queues it
			continue
		}
		require.ErrorIs(t, err, ErrNoProvider, s)
		assert.EqualError(t, err, "cluster: no provider for service demo.Greeter:1.0 (method SayHello)", s)
	}
	fs := fakes(2)
	fs[0].down.Store(true)
	fs[1].down.Store(true)
	c := newCluster(t, static(fs), Options{})
	_, err := c.Invoke(testCtx(t), invocation("SayHello"))
	require.ErrorIs(t, err, ErrNoProvider)
	assert.ErrorContains(t, err, "none of 2 providers is available")
	assert.Equal(t, []int64{0, 0}, counts(fs))
}

// Options.NoProvider rewrites the errors that wrap ErrNoProvider, with
// every strategy that returns them, after a retry too, and nothing else.
func TestNoProviderExplained(t *testing.T) {
	var explained atomic.Int64
	explain := func(err error) error {
		explained.Add(1)
		return fmt.Errorf("%w; asked nobody", err)
	}
	for _, s := range []string{Failover, Failfast, Forking, Broadcast} {
		c := newCluster(t, NewStatic(), Options{Strategy: s, NoProvider: explain})
		_, err := c.Invoke(testCtx(t), invocation("SayHello"))
		require.ErrorIs(t, err, ErrNoProvider, s)
		assert.EqualError(t, err, "cluster: no provider for service demo.Greeter:1.0 (method SayHello); asked nobody", s)
	}
	assert.Equal(t, int64(4), explained.Load())

	// The first attempt fails without an answer and takes its provider
	// down; the retry finds none left.
	fs := fakes(1)
	fs[0].answer = func(context.Context, int64) error {
		fs[0].down.Store(true)
		return status.ErrConnLost
	}
	c := newCluster(t, static(fs), Options{Retries: 2, NoProvider: explain})
	_, err := c.Invoke(testCtx(t), invocation("SayHello"))
	require.ErrorIs(t, err, ErrNoProvider)
	assert.ErrorContains(t, err, "; asked nobody")
	assert.Equal(t, int64(5), explained.Load())

	// Answers and other failures are not explained.
	for _, answer := range []error{nil, status.ErrConnLost, &service.Error{Message: "no"}} {
		fs := fakes(1)
		fs[0].answer = func(context.Context, int64) error { return answer }
		c := newCluster(t, static(fs), Options{NoProvider: explain})
		_, err := c.Invoke(testCtx(t), invocation("SayHello"))
		assert.Equal(t, answer != nil, err != nil, "%v", answer)
		assert.NotErrorIs(t, err, ErrNoProvider)
	}
	assert.Equal(t, int64(5), explained.Load())
}

// failoverModes are the two ways a failover test calls: through the
// cluster invoker (which makes failover's first attempt itself) and
// through the strategy's own Invoke.
var failoverModes = map[string]func(c *Invoker, ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error){
	"invoker": func(c *Invoker, ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		return c.Invoke(ctx, inv)
	},
	"strategy": func(c *Invoker, ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		return c.strategy.Invoke(ctx, c, inv)
	},
}

// TestFailover runs each case through the cluster invoker (which makes
// failover's first attempt itself) and through the strategy's own Invoke.
func TestFailover(t *testing.T) {
	for mode, call := range failoverModes {
		t.Run(mode, func(t *testing.T) {
			connLost := func(context.Context, int64) error { return status.ErrConnLost }
			t.Run("retries on other providers until one answers", func(t *testing.T) {
				fs := fakes(3)
				fs[0].answer, fs[1].answer = connLost, connLost
				c := newCluster(t, static(fs), Options{LoadBalance: loadbalance.RoundRobin, Retries: DefaultRetries})
				var reply string
				inv := invocation("m")
				inv.Reply = &reply
				_, err := call(c, testCtx(t), inv)
				require.NoError(t, err)
				assert.Equal(t, "C", reply)
				assert.Equal(t, []int64{1, 1, 1}, counts(fs), "each attempt on another provider")
			})
			t.Run("one attempt reads as one", func(t *testing.T) {
				fs := fakes(2)
				for _, f := range fs {
					f.answer = connLost
				}
				c := newCluster(t, static(fs), Options{Retries: 0})
				_, err := call(c, testCtx(t), invocation("m"))
				require.ErrorIs(t, err, status.ErrConnLost)
				assert.Regexp(t, `^cluster: failover demo.Greeter:1.0.m: 1 attempt failed: attempt 1 on 127.0.0.\d:20880: connection lost$`, err.Error())
			})
			t.Run("gives up after retries+1 attempts with every error", func(t *testing.T) {
				fs := fakes(4)
				for _, f := range fs {
					f.answer = func(context.Context, int64) error { return status.ErrTimeout }
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, testCtx(t), invocation("m"))
				require.ErrorIs(t, err, status.ErrTimeout)
				assert.ErrorContains(t, err, "cluster: failover demo.Greeter:1.0.m: 3 attempts failed")
				c3 := counts(fs)
				assert.Equal(t, int64(3), sum(c3))
				for _, n := range c3 {
					assert.LessOrEqual(t, n, int64(1), "no provider tried twice: %v", c3)
				}
			})
			t.Run("business errors are not retried and come back as they are", func(t *testing.T) {
				fs := fakes(3)
				for _, f := range fs {
					f.answer = func(context.Context, int64) error {
						return &service.Error{Code: 5, Message: "no such user", Remote: true}
					}
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, testCtx(t), invocation("m"))
				var se *service.Error
				require.ErrorAs(t, err, &se)
				assert.Equal(t, "remote error (code 5, not found): no such user", err.Error())
				assert.Equal(t, int64(1), sum(counts(fs)))
			})
			t.Run("answers other than busy are not retried", func(t *testing.T) {
				fs := fakes(3)
				for _, f := range fs {
					f.answer = func(context.Context, int64) error { return status.ErrServiceNotFound }
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, testCtx(t), invocation("m"))
				require.ErrorIs(t, err, status.ErrServiceNotFound)
				assert.Equal(t, int64(1), sum(counts(fs)))
			})
			t.Run("a busy provider is retried elsewhere, then an answer stops", func(t *testing.T) {
				fs := fakes(3)
				fs[0].answer = func(context.Context, int64) error { return status.ErrServerBusy }
				fs[1].answer = func(context.Context, int64) error { return status.ErrBadRequest }
				fs[2].answer = fs[0].answer
				c := newCluster(t, static(fs), Options{LoadBalance: loadbalance.RoundRobin, Retries: DefaultRetries})
				_, err := call(c, testCtx(t), invocation("m"))
				require.ErrorIs(t, err, status.ErrBadRequest)
				require.ErrorIs(t, err, status.ErrServerBusy)
				assert.Equal(t, []int64{1, 1, 0}, counts(fs))
			})
			t.Run("retries option, per method, never from attachments", func(t *testing.T) {
				fs := fakes(5)
				for _, f := range fs {
					f.answer = connLost
				}
				c := newCluster(t, static(fs), Options{Retries: 4})
				_, err := call(c, testCtx(t), invocation("m"))
				require.Error(t, err)
				assert.Equal(t, []int64{1, 1, 1, 1, 1}, counts(fs))
				c = newCluster(t, static(fs), Options{Retries: 0, MethodRetries: map[string]int{"twice": 1}})
				_, _ = call(c, testCtx(t), invocation("m"))
				assert.Equal(t, int64(6), sum(counts(fs)), "0 means no retry")
				_, _ = call(c, testCtx(t), invocation("twice"))
				assert.Equal(t, int64(8), sum(counts(fs)))
				inv := invocation("m")
				inv.Attachments = map[string]string{protocol.KeyRetries: "3"}
				_, _ = call(c, testCtx(t), inv)
				assert.Equal(t, int64(9), sum(counts(fs)), "a retries attachment is the user's, not a setting")
			})
			t.Run("more retries than providers reuse them", func(t *testing.T) {
				fs := fakes(2)
				for _, f := range fs {
					f.answer = connLost
				}
				c := newCluster(t, static(fs), Options{Retries: 3})
				_, err := call(c, testCtx(t), invocation("m"))
				require.Error(t, err)
				assert.Equal(t, int64(4), sum(counts(fs)))
			})
			t.Run("stops when the context is done", func(t *testing.T) {
				fs := fakes(3)
				ctx, cancel := context.WithCancel(testCtx(t))
				defer cancel()
				for _, f := range fs {
					f.answer = func(context.Context, int64) error { cancel(); return status.ErrTimeout }
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, ctx, invocation("m"))
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorIs(t, err, status.ErrTimeout)
				assert.Equal(t, int64(1), sum(counts(fs)))
			})
			t.Run("skips providers that are down", func(t *testing.T) {
				fs := fakes(3)
				fs[1].down.Store(true)
				c := newCluster(t, static(fs), Options{LoadBalance: loadbalance.RoundRobin, Retries: DefaultRetries})
				for range 10 {
					_, err := call(c, testCtx(t), invocation("m"))
					require.NoError(t, err)
				}
				assert.Equal(t, []int64{5, 0, 5}, counts(fs))
			})

		})
	}
}

func TestFailfast(t *testing.T) {
	fs := fakes(3)
	for _, f := range fs {
		f.answer = func(context.Context, int64) error { return status.ErrConnLost }
	}
	c := newCluster(t, static(fs), Options{Strategy: Failfast})
	_, err := c.Invoke(testCtx(t), invocation("m"))
	require.ErrorIs(t, err, status.ErrConnLost)
	assert.Regexp(t, `^cluster: failfast demo.Greeter:1.0.m on 127.0.0.\d:20880: connection lost$`, err.Error())
	assert.Equal(t, int64(1), sum(counts(fs)))
}

func TestFailsafe(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	fs := fakes(2)
	for _, f := range fs {
		f.answer = func(context.Context, int64) error { return status.ErrConnLost }
	}
	c := newCluster(t, static(fs), Options{Strategy: Failsafe, Logger: zap.New(core)})
	res, err := c.Invoke(testCtx(t), invocation("m"))
	require.NoError(t, err)
	assert.Nil(t, res.Value)
	assert.Equal(t, int64(1), sum(counts(fs)))
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].Message, "failsafe")
}

func TestBroadcast(t *testing.T) {
	fs := fakes(4)
	c := newCluster(t, static(fs), Options{Strategy: Broadcast})
	_, err := c.Invoke(testCtx(t), invocation("m"))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1, 1, 1}, counts(fs))
	fs[2].answer = func(context.Context, int64) error { return status.ErrTimeout }
	_, err = c.Invoke(testCtx(t), invocation("m"))
	require.ErrorIs(t, err, status.ErrTimeout)
	assert.ErrorContains(t, err, "1 of 4 providers failed")
	assert.Equal(t, []int64{2, 2, 2, 2}, counts(fs), "all are called even when one fails")
}

func TestForking(t *testing.T) {
	t.Run("first success wins and the slow call is cancelled", func(t *testing.T) {
		fs := fakes(2)
		cancelled := make(chan struct{})
		fs[0].answer = func(ctx context.Context, _ int64) error {
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		}
		c := newCluster(t, static(fs), Options{Strategy: Forking})
		var reply string
		inv := invocation("m")
		inv.Reply = &reply
		res, err := c.Invoke(testCtx(t), inv)
		require.NoError(t, err)
		assert.Equal(t, "B", reply)
		assert.Same(t, &reply, res.Value)
		select {
		case <-cancelled:
		case <-testCtx(t).Done():
			t.Fatal("slow fork not cancelled")
		}
		assert.Equal(t, []int64{1, 1}, counts(fs))
	})
	t.Run("forks providers out of more", func(t *testing.T) {
		fs := fakes(5)
		c := newCluster(t, static(fs), Options{Strategy: Forking, Forks: 3})
		// every fork answers; wait for the stragglers by closing
		_, err := c.Invoke(testCtx(t), invocation("m"))
		require.NoError(t, err)
		c.Close()
		cs := counts(fs)
		assert.Equal(t, int64(3), sum(cs))
		for _, n := range cs {
			assert.LessOrEqual(t, n, int64(1), "%v", cs)
		}
	})
	t.Run("returns once every fork has returned", func(t *testing.T) {
		// A fork still running when Invoke returns would read the
		// caller's arguments after the call, which the caller may reuse.
		fs := fakes(2)
		var slowReturned atomic.Bool
		fs[0].answer = func(ctx context.Context, _ int64) error {
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // a fork slow to notice
			slowReturned.Store(true)
			return ctx.Err()
		}
		c := newCluster(t, static(fs), Options{Strategy: Forking})
		_, err := c.Invoke(testCtx(t), invocation("m", []byte("arg")))
		require.NoError(t, err)
		assert.True(t, slowReturned.Load(), "Invoke returned while a fork still ran")
	})
	t.Run("fails only when all fail", func(t *testing.T) {
		fs := fakes(2)
		fs[0].answer = func(context.Context, int64) error { return status.ErrConnLost }
		fs[1].answer = func(context.Context, int64) error { return status.ErrTimeout }
		c := newCluster(t, static(fs), Options{Strategy: Forking})
		_, err := c.Invoke(testCtx(t), invocation("m"))
		require.ErrorIs(t, err, status.ErrConnLost)
		require.ErrorIs(t, err, status.ErrTimeout)
		assert.ErrorContains(t, err, "all 2 providers failed")
	})
}

func TestFailback(t *testing.T) {
	t.Run("a failed call is retried in the background on another provider", func(t *testing.T) {
		fs := fakes(2)
		retried := make(chan string, 4)
		for _, f := range fs {
			f.answer = func(_ context.Context, n int64) error {
				if n == 1 && f.name == "A" {
					return status.ErrConnLost
				}
				retried <- f.name
				return nil
			}
		}
		// first call goes to A (round robin) and fails
		c := newCluster(t, static(fs), Options{Strategy: Failback, LoadBalance: loadbalance.RoundRobin, FailbackBackoff: time.Millisecond})
		var reply string
		inv := invocation("m")
		inv.Reply = &reply
		res, err := c.Invoke(testCtx(t), inv)
		require.NoError(t, err)
		assert.Nil(t, res.Value)
		select {
		case name := <-retried:
			assert.Equal(t, "B", name, "the retry avoids the provider that failed")
		case <-testCtx(t).Done():
			t.Fatal("no background retry")
		}
		assert.Equal(t, "", reply, "a background retry never writes the caller's reply")
	})
	t.Run("the retry has its own copy of a []byte argument", func(t *testing.T) {
		fs := fakes(2)
		// The first call goes to A (round robin) and fails; the retry,
		// after the caller has reused its []byte, goes to B.
		fs[0].answer = func(context.Context, int64) error { return status.ErrConnLost }
		seen := make(chan string, 4)
		b := &argsRecorder{fakeInvoker: fs[1], seen: seen}
		c := newCluster(t, NewStatic(fs[0], b), Options{Strategy: Failback, LoadBalance: loadbalance.RoundRobin, FailbackBackoff: 50 * time.Millisecond})
		arg := []byte("original")
		_, err := c.Invoke(testCtx(t), invocation("m", arg))
		require.NoError(t, err)
		copy(arg, "XXXXXXXX") // the caller's again
		select {
		case got := <-seen:
			assert.Equal(t, "original", got, "the background retry read the caller's reused []byte")
		case <-testCtx(t).Done():
			t.Fatal("no background retry")
		}
		assert.Equal(t, int64(1), fs[0].calls.Load())
	})
	t.Run("gives up after FailbackRetries", func(t *testing.T) {
		fs := fakes(2)
		for _, f := range fs {
			f.answer = func(context.Context, int64) error { return status.ErrConnLost }
		}
		c := newCluster(t, static(fs), Options{Strategy: Failback, FailbackBackoff: time.Millisecond, FailbackRetries: 3})
		_, err := c.Invoke(testCtx(t), invocation("m"))
		require.NoError(t, err)
		fb := c.strategy.(*failback)
		require.Eventually(t, func() bool { return sum(counts(fs)) == 4 && fb.Pending() == 0 }, 5*time.Second, time.Millisecond)
	})
	t.Run("the queue is bounded and Close stops the retries", func(t *testing.T) {
		fs := fakes(1)
		fs[0].answer = func(context.Context, int64) error { return status.ErrConnLost }
		c, err := New(static(fs), Options{Strategy: Failback, FailbackBackoff: time.Hour, FailbackQueue: 2})
		require.NoError(t, err)
		for range 2 {
			_, err := c.Invoke(testCtx(t), invocation("m"))
			require.NoError(t, err)
		}
		_, err = c.Invoke(testCtx(t), invocation("m"))
		require.ErrorIs(t, err, status.ErrConnLost)
		assert.ErrorContains(t, err, "failback queue full")
		require.NoError(t, c.Close())
		require.NoError(t, c.Close())
		_, err = c.Invoke(testCtx(t), invocation("m"))
		require.ErrorIs(t, err, ErrClosed)
		assert.Equal(t, int64(3), fs[0].calls.Load())
	})
}

// TestLeastActiveCountsEveryCall shows that calls through the cluster are
// counted without any filter configured: a provider with calls in flight
// is avoided.
func TestLeastActiveCountsEveryCall(t *testing.T) {
	fs := fakes(2)
	release := make(chan struct{})
	started := make(chan string, 8)
	for _, f := range fs {
		f.answer = func(ctx context.Context, n int64) error {
			if n <= 2 {
				started <- f.name
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}
	}
	c := newCluster(t, static(fs), Options{LoadBalance: loadbalance.LeastActive})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Invoke(ctx, invocation("m")) })
	first := <-started
	// the second call must go to the idle provider, and so on
	wg.Go(func() { _, _ = c.Invoke(ctx, invocation("m")) })
	second := <-started
	assert.NotEqual(t, first, second)
	assert.Equal(t, int64(1), c.Stats().For(fs[0]).Active())
	assert.Equal(t, int64(1), c.Stats().For(fs[1]).Active())
	wg.Go(func() { _, _ = c.Invoke(ctx, invocation("m")) })
	<-started
	close(release)
	wg.Wait()
	assert.Equal(t, int64(0), c.Stats().For(fs[0]).Active())
	assert.Equal(t, int64(0), c.Stats().For(fs[1]).Active())
	assert.Equal(t, uint64(3), c.Stats().For(fs[0]).Total()+c.Stats().For(fs[1]).Total())
}

// TestConcurrentInvokeWhileListChanges runs 64 goroutines through every
// strategy and several balancers while the directory changes; run with
// -race.
func TestConcurrentInvokeWhileListChanges(t *testing.T) {
	fs := fakes(6)
	fs[5].answer = func(context.Context, int64) error { return status.ErrConnLost }
	lists := [][]protocol.Invoker{
		{fs[0], fs[1], fs[2]}, {fs[3], fs[4], fs[5]}, {fs[0], fs[2], fs[4], fs[5]}, {fs[1]},
	}
	for _, lb := range []string{loadbalance.Random, loadbalance.RoundRobin, loadbalance.LeastActive, loadbalance.ConsistentHash, loadbalance.P2C} {
		for _, s := range []string{Failover, Failfast, Forking} {
			t.Run(lb+"/"+s, func(t *testing.T) {
				dir := &swapDir{}
				dir.set(lists[0])
				c := newCluster(t, dir, Options{Strategy: s, LoadBalance: lb, Routers: []Router{NewTagRouter()}})
				ctx := testCtx(t)
				var wg sync.WaitGroup
				done := make(chan struct{})
				for g := range 64 {
					wg.Go(func() {
						for i := range 40 {
							var reply string
							inv := invocation("m", strconv.Itoa(g*100+i))
							inv.Reply = &reply
							_, err := c.Invoke(ctx, inv)
							if err != nil && !errors.Is(err, status.ErrConnLost) {
								t.Error(err)
								return
							}
						}
					})
				}
				wg.Go(func() {
					for i := 0; i < 400; i++ {
						select {
						case <-done:
							return
						default:
						}
						dir.set(lists[i%len(lists)])
					}
				})
				wg.Wait()
				close(done)
				require.NoError(t, c.Close())
				for _, f := range fs {
					assert.Equal(t, int64(0), c.Stats().For(f).Active())
				}
			})
		}
	}
}

// TestPickAllocatesNothing: once the subsets of a snapshot are derived, a
// pick allocates nothing, for every balancer, whatever the mix of tagged,
// untagged and retried calls.
func TestPickAllocatesNothing(t *testing.T) {
	for _, algo := range loadbalance.Builtin().Names() {
		for _, n := range []int{3, 100, 1000} {
			t.Run(algo+"/"+strconv.Itoa(n), func(t *testing.T) {
				c, untagged, tagged, tried := pickSetup(t, algo, n)
				defer c.Close()
				mix := func() {
					for _, call := range []struct {
						inv   *protocol.Invocation
						tried Tried
					}{{untagged, Tried{}}, {tagged, Tried{}}, {untagged, tried}, {tagged, tried}} {
						p, err := c.Pick(call.inv, call.tried)
						if err != nil {
							t.Fatal(err)
						}
						if call.tried.Has(p) {
							t.Fatalf("retry picked the provider it tried: %s", p.URL().Address())
						}
					}
				}
				mix() // derive the subsets and pickers
				if raceEnabled {
					return // sync.Pool drops items at random under the race detector
				}
				if allocs := testing.AllocsPerRun(50, mix); allocs != 0 {
					t.Fatalf("%v allocations per mix of four picks", allocs)
				}
			})
		}
	}
}

// argsRecorder is a fakeInvoker that sends the first argument of each call,
// as a string, to seen.
type argsRecorder struct {
	*fakeInvoker
	seen chan string
}

func (r *argsRecorder) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	if len(inv.Args) > 0 {
		if b, ok := inv.Args[0].([]byte); ok {
			r.seen <- string(b)
		}
	}
	return r.fakeInvoker.Invoke(ctx, inv)
}
