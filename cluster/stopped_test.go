package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/status"
)

// TestFailoverCountsOnlyAttempts: the failover's error counts the calls it
// made, not the context's end or a failed pick that stopped it, and says
// what stopped it; the context's error and every attempt's error stay in
// the chain. Through the cluster invoker and the strategy's own Invoke.
func TestFailoverCountsOnlyAttempts(t *testing.T) {
	for mode, call := range failoverModes {
		t.Run(mode, func(t *testing.T) {
			t.Run("context ends after the first attempt", func(t *testing.T) {
				ctx, cancel := context.WithCancel(testCtx(t))
				defer cancel()
				fs := fakes(3)
				for _, f := range fs {
					f.answer = func(context.Context, int64) error {
						cancel() // the caller gives up while this attempt fails
						return status.ErrConnLost
					}
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, ctx, invocation("m"))
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorIs(t, err, status.ErrConnLost)
				assert.Regexp(t, `^cluster: failover demo.Greeter:1.0.m: the call's context ended \(context canceled\) `+
					`after 1 attempt, which failed: attempt 1 on 127.0.0.\d:20880: connection lost$`, err.Error())
				assert.Equal(t, int64(1), sum(counts(fs)))
			})
			t.Run("context ended before the first attempt", func(t *testing.T) {
				ctx, cancel := context.WithCancel(testCtx(t))
				cancel()
				fs := fakes(2)
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, ctx, invocation("m"))
				require.ErrorIs(t, err, context.Canceled)
				assert.EqualError(t, err, "cluster: failover demo.Greeter:1.0.m: the call's context ended before the first attempt: context canceled")
				assert.Equal(t, int64(0), sum(counts(fs)))
			})
			t.Run("no provider left to retry on", func(t *testing.T) {
				fs := fakes(2)
				for _, f := range fs {
					f.answer = func(context.Context, int64) error {
						for _, g := range fs {
							g.down.Store(true) // every provider goes down with this attempt
						}
						return status.ErrConnLost
					}
				}
				c := newCluster(t, static(fs), Options{Retries: DefaultRetries})
				_, err := call(c, testCtx(t), invocation("m"))
				require.ErrorIs(t, err, status.ErrConnLost)
				require.ErrorIs(t, err, ErrNoProvider)
				assert.Regexp(t, `^cluster: failover demo.Greeter:1.0.m: 1 attempt failed, then no provider to retry on \(.+\): `+
					`attempt 1 on 127.0.0.\d:20880: connection lost$`, err.Error())
				assert.Equal(t, int64(1), sum(counts(fs)))
			})
		})
	}
}

// TestBroadcastContextEnds: a broadcast whose context ends part way says
// how many providers it called and how many of those failed; the
// providers it did not call are not counted as failures.
func TestBroadcastContextEnds(t *testing.T) {
	for _, fail := range []bool{false, true} {
		ctx, cancel := context.WithCancel(testCtx(t))
		fs := fakes(3)
		fs[0].answer = func(context.Context, int64) error {
			cancel()
			if fail {
				return status.ErrConnLost
			}
			return nil
		}
		c := newCluster(t, static(fs), Options{Strategy: Broadcast})
		_, err := c.Invoke(ctx, invocation("m"))
		cancel()
		require.ErrorIs(t, err, context.Canceled)
		if fail {
			require.ErrorIs(t, err, status.ErrConnLost)
			assert.Regexp(t, `^cluster: broadcast demo.Greeter:1.0.m: the call's context ended \(context canceled\) after calling 1 of 3 providers, 1 of which failed: `, err.Error())
		} else {
			assert.EqualError(t, err, "cluster: broadcast demo.Greeter:1.0.m: the call's context ended (context canceled) after calling 1 of 3 providers, none of which failed")
		}
		assert.Equal(t, []int64{1, 0, 0}, counts(fs))
	}
}
