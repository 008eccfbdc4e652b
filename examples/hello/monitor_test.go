package hello_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/monitor"
)

// sums adds up the rows it is sent by side and provider ("" for the
// consumer's call-level rows).
type sums struct {
	mu    sync.Mutex
	calls map[string]int64
}

func (s *sums) Collect(_ context.Context, r *monitor.Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range r.Rows {
		s.calls[string(w.Side)+" "+w.Provider] += w.Calls
	}
	return nil
}

func (s *sums) get() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TestHelloReportsToFixedMonitor runs the provider and the consumer as
// real processes with -monitor (a monitor at a fixed address, here a
// collector in the test) and -report-interval 1s: the monitor hears of
// every call, from both sides.
func TestHelloReportsToFixedMonitor(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	zkc := zktest.Start(t)
	dir := programs(t, ctx)
	coll := &sums{calls: map[string]int64{}}
	mon, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "test-monitor"},
		Services:    map[string]config.ServiceConfig{"monitor": {Interface: monitor.ServiceName}},
	})
	require.NoError(t, err)
	defer func() { _ = mon.Shutdown(context.Background()) }()
	u, err := mon.Export(ctx, "monitor", coll)
	require.NoError(t, err)

	prov := exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-registry", zkc.Address(), "-name", "p",
		"-monitor", u.Address(), "-report-interval", "1s")
	prov.Stderr = os.Stderr
	stdout, err := prov.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, prov.Start())
	t.Cleanup(func() {
		if prov.ProcessState == nil {
			_ = prov.Process.Kill()
			_ = prov.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the provider printed nothing")
	m := servingLine.FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "provider printed %q", lines.Text())
	addr := m[2]

	cons := exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", zkc.Address(), "-json",
		"-calls", "250", "-concurrency", "2", "-monitor", u.Address(), "-report-interval", "1s")
	cons.Stderr = os.Stderr
	_, err = cons.Output()
	require.NoError(t, err)
	// The consumer sent its last report as it shut down; the provider
	// reports on its ticker.
	want := map[string]int64{"consumer ": 250, "consumer " + addr: 250, "provider " + addr: 250}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !assert.ObjectsAreEqual(want, coll.get()) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, want, coll.get())
	require.NoError(t, prov.Process.Signal(os.Interrupt))
	require.NoError(t, prov.Wait())
	assert.Equal(t, want, coll.get(), "nothing counted twice at shutdown")
}
