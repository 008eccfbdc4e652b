package config_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// stall counts its calls and answers none: each waits for its deadline.
type stall struct{ calls atomic.Int64 }

func (s *stall) Wait(ctx context.Context) (string, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return "", ctx.Err()
}

type stallClient struct {
	Wait func(ctx context.Context) (string, error)
}

// failbackFromYAML exports h as the service test.Stall on a memory
// registry and refers it from a consumer configured by the YAML
// references, whose log it observes (Info and up): the consumer, its
// stub and its log.
func failbackFromYAML(ctx context.Context, t *testing.T, h any, references string) (*config.Application, *stallClient, *observer.ObservedLogs) {
	t.Helper()
	reg := memory.New()
	t.Cleanup(func() { _ = reg.Close() })
	prov, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"stall": {Interface: "test.Stall"}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	_, err = prov.Export(ctx, "stall", h)
	require.NoError(t, err)

	c, err := config.Parse(strings.NewReader("registries: {mem: {address: \"memory://test\"}}\n" + references))
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	cons, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var cl stallClient
	require.NoError(t, cons.Refer(ctx, "stall", &cl))
	return cons, &cl, logs
}

// The failback settings of a reference come from YAML and take effect:
// retries (the call runs 1 + retries times on the provider, then the
// strategy gives up) and queue (a second failed call, while the first waits
// out its backoff, finds the queue full and fails instead of being queued).
func TestReferenceFailbackFromYAML(t *testing.T) {
	ctx := testCtx(t)
	s := &stall{}
	cons, cl, logs := failbackFromYAML(ctx, t, s, `
references:
  stall: {interface: test.Stall, check: true, cluster: failback, timeout: 100ms,
          failback: {retries: 2, queue: 1, backoff: 1s, timeout: 100ms}}
`)

	// The first failed call is queued: the caller gets an empty result.
	v, err := cl.Wait(ctx)
	require.NoError(t, err)
	require.Empty(t, v)
	// The second finds the queue (1) full while the first waits out its 1 s
	// backoff, and fails.
	_, err = cl.Wait(ctx)
	require.ErrorContains(t, err, "failback queue full (1 calls waiting)")

	// The first is retried twice, then given up.
	require.Eventually(t, func() bool {
		return logs.FilterMessage("giving up on failed call").Len() == 1
	}, 30*time.Second, 10*time.Millisecond)
	gaveUp := logs.FilterMessage("giving up on failed call").All()[0]
	require.Equal(t, int64(2), gaveUp.ContextMap()["retries"])
	var attempts int64
	for _, st := range cons.Monitor().Snapshot() {
		if st.Provider != "" {
			attempts += st.Calls
		}
	}
	require.Equal(t, int64(4), attempts, "two first attempts and two retries")
	// (A request whose time ran out in a loaded provider's queue is not
	// run, so the provider may have seen fewer.)
	require.LessOrEqual(t, s.calls.Load(), int64(4))
	require.Equal(t, 1, logs.FilterMessage("call failed, retrying in the background").Len(), "only the first call was queued")
}

// stamp answers no call: each waits for its deadline. It records how long
// each call's context had when it arrived.
type stamp struct {
	mu   sync.Mutex
	left []time.Duration
}

func (s *stamp) Wait(ctx context.Context) (string, error) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.mu.Lock()
	s.left = append(s.left, left)
	s.mu.Unlock()
	<-ctx.Done()
	return "", ctx.Err()
}

func (s *stamp) seen() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.left)
}

// The failback backoff and timeout of a reference come from YAML and take
// effect. Timeout: each background retry runs with failback.timeout
// (400ms), not the reference's 5s nor the default 1s: the provider's
// context of every call it sees has at most 400ms (the caller's first
// attempt had 300ms). Backoff: the two retries start 100ms and then 200ms
// after the failure before them, so the call is given up no sooner than
// 300ms after it was queued; the default backoff (5s, then 10s) would take
// at least 15s, and the bound checked is that, not a speed.
func TestReferenceFailbackBackoffAndTimeoutFromYAML(t *testing.T) {
	ctx := testCtx(t)
	s := &stamp{}
	const backoff, retryTimeout = 100 * time.Millisecond, 400 * time.Millisecond
	_, cl, logs := failbackFromYAML(ctx, t, s, `
references:
  stall: {interface: test.Stall, check: true, cluster: failback, timeout: 5s,
          failback: {retries: 2, backoff: 100ms, timeout: 400ms}}
`)

	// The first attempt ends with the caller's 300ms; the retries keep the
	// caller's context values but not its deadline.
	first, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	v, err := cl.Wait(first)
	require.NoError(t, err, "failback queues the failed call")
	require.Empty(t, v)

	giveUp := func() bool { return logs.FilterMessage("giving up on failed call").Len() == 1 }
	require.Eventually(t, giveUp, 30*time.Second, 10*time.Millisecond)
	queued := logs.FilterMessage("call failed, retrying in the background").All()
	require.Len(t, queued, 1)
	gaveUp := logs.FilterMessage("giving up on failed call").All()[0]
	require.Equal(t, int64(2), gaveUp.ContextMap()["retries"])
	took := gaveUp.Time.Sub(queued[0].Time)
	require.GreaterOrEqual(t, took, backoff+2*backoff, "two retries, the second after twice the backoff")
	require.Less(t, took, 15*time.Second, "the YAML backoff, not the default 5s then 10s")

	// The provider saw the first attempt and the retries (a request whose
	// time ran out in a loaded provider's queue is not run, so perhaps
	// fewer); none had more time than failback.timeout.
	seen := s.seen()
	require.NotEmpty(t, seen)
	require.LessOrEqual(t, len(seen), 3)
	for i, left := range seen {
		require.Positive(t, left, "call %d has a deadline", i)
		require.LessOrEqual(t, left, retryTimeout, "call %d of %d: the provider's context had %v; failback.timeout is %v (the reference's timeout 5s, the default 1s)", i, len(seen), left, retryTimeout)
	}
	require.Contains(t, gaveUp.ContextMap()["error"], "(context deadline)", "the last retry ended at failback.timeout")
}
