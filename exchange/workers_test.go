package exchange_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
)

// TestSurplusIdleWorkersStop: requests that block on the goroutines that
// read them leave those goroutines as workers once the watcher has had
// their connections read on by others. When they are done, the workers
// beyond the idle limit stop at once, not after WorkerIdle (an hour here):
// idle goroutines cost every GC cycle a scan of their stacks.
func TestSurplusIdleWorkersStop(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	s, addr := serve(t, h, &exchange.Options{Workers: 200, WorkerIdle: time.Hour})
	limit := exchange.MaxIdleWorkers(s)
	n := limit + 24
	results := make(chan error, n)
	for range n {
		c := dial(t, addr, nil)
		go func() { results <- echoes(ctx, c, "block") }()
	}
	for range n {
		<-h.started
	}
	require.GreaterOrEqual(t, s.Workers(), n, "each blocked request holds a worker's place")
	close(h.release)
	for range n {
		require.NoError(t, <-results)
	}
	require.Eventually(t, func() bool { return s.Workers() <= limit }, 10*time.Second, time.Millisecond,
		"workers: %d, limit %d", s.Workers(), limit)
	// The server still answers, with the workers it kept.
	c := dial(t, addr, nil)
	got, err := call(ctx, c, "ok")
	require.NoError(t, err)
	require.Equal(t, "ok", got)
}
