package config_test

import (
	"context"
	"strings"
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

// The failback settings of a reference come from YAML and take effect:
// retries (the call runs 1 + retries times on the provider, then the
// strategy gives up) and queue (a second failed call, while the first waits
// out its backoff, finds the queue full and fails instead of being queued).
func TestReferenceFailbackFromYAML(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	s := &stall{}
	prov, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"stall": {Interface: "test.Stall"}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	_, err = prov.Export(ctx, "stall", s)
	require.NoError(t, err)

	c, err := config.Parse(strings.NewReader(`
registries: {mem: {address: "memory://test"}}
references:
  stall: {interface: test.Stall, check: true, cluster: failback, timeout: 100ms,
          failback: {retries: 2, queue: 1, backoff: 1s, timeout: 100ms}}
`))
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	cons, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var cl stallClient
	require.NoError(t, cons.Refer(ctx, "stall", &cl))

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
