package config_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/service"
)

// collector is a monitor service that keeps every report once, keyed as
// the monitor server keys them.
type collector struct {
	mu      sync.Mutex
	seen    map[string]bool
	reports []*monitor.Report
}

func (c *collector) Collect(_ context.Context, r *monitor.Report) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := fmt.Sprintf("%s|%s|%d|%d", r.Application, r.Host, r.Seq, r.Start.UnixNano())
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if !c.seen[k] {
		c.seen[k] = true
		c.reports = append(c.reports, r)
	}
	return nil
}

func (c *collector) count(app string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.reports {
		if r.Application == app {
			n++
		}
	}
	return n
}

// tally sums the rows of every report by side, service, provider and
// consumer: "side service provider consumer" -> calls/ok/failures by kind.
type tally struct {
	calls, ok int64
	kinds     map[string]int64
	samples   int64
}

func (c *collector) tally(t *testing.T) map[string]*tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*tally{}
	for _, r := range c.reports {
		for _, w := range r.Rows {
			k := strings.Join([]string{string(w.Side), w.Service, w.Provider, w.Consumer}, " ")
			tl := out[k]
			if tl == nil {
				tl = &tally{kinds: map[string]int64{}}
				out[k] = tl
			}
			tl.calls += w.Calls
			tl.ok += w.Successes
			for kind, n := range w.FailuresByKind {
				tl.kinds[kind] += n
			}
			h, err := w.Latency.Decode()
			require.NoError(t, err)
			tl.samples += h.TotalCount()
		}
	}
	return out
}

// flaky answers with its name and fails every fifth call.
type flaky struct{ name string }

func (f flaky) Who(_ context.Context, seq int64) (string, error) {
	if seq%5 == 0 {
		return "", service.Errorf(7, "%s refuses %d", f.name, seq)
	}
	return fmt.Sprintf("%s:%d", f.name, seq), nil
}

// startCollector exports c as the monitor service, registered in the
// registry at zkAddr (when set), on port (0: any).
func startCollector(ctx context.Context, t *testing.T, zkAddr string, port int, c *collector) (*config.Application, string) {
	t.Helper()
	cfg := &config.Config{
		Application: config.ApplicationConfig{Name: "test-monitor"},
		Protocols:   map[string]config.ProtocolConfig{"dubbo": {Port: port}},
		Services:    map[string]config.ServiceConfig{"monitor": {Interface: monitor.ServiceName}},
	}
	if zkAddr != "" {
		cfg.Registries = map[string]config.RegistryConfig{"zk": registryConfig(zkAddr, t.TempDir())}
	}
	app, err := config.New(cfg, config.WithLogger(logger(t).Named("monitor")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	u, err := app.Export(ctx, "monitor", c)
	require.NoError(t, err)
	return app, u.Address()
}

// Reports found through ZooKeeper add up, per side and per provider, to
// the calls made: successes, business failures, and calls that found no
// provider; at least one report goes on the interval's ticker, and the
// rest at shutdown.
func TestMonitorReportsThroughZooKeeper(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	coll := &collector{}
	startCollector(ctx, t, zkc.Address(), 0, coll)

	// 5 s, not 1 s: each send to the monitor is bounded by the interval
	// (monitor.Options.SendTimeout is at most Interval), and at load the
	// first Flush's send ran out of 1 s before failover's first attempt
	// ("the call's context ended ... before the first attempt", errs2's
	// run of go test -race ./config at 23:18 UTC).
	mon := config.MonitorConfig{Interval: 5 * time.Second}
	addrs := map[string]string{}
	var provs []*config.Application
	for _, name := range []string{"A", "B"} {
		app, err := config.New(&config.Config{
			Application: config.ApplicationConfig{Name: "e2e-provider-" + name},
			Registries:  map[string]config.RegistryConfig{"zk": registryConfig(zkc.Address(), t.TempDir())},
			Services:    map[string]config.ServiceConfig{"named": {Interface: e2eInterface}},
			Monitor:     mon,
		}, config.WithLogger(logger(t).Named(name)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
		u, err := app.Export(ctx, "named", flaky{name: name})
		require.NoError(t, err)
		addrs[name] = u.Address()
		provs = append(provs, app)
	}
	zero := 0
	cons, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "e2e-consumer"},
		Registries:  map[string]config.RegistryConfig{"zk": registryConfig(zkc.Address(), t.TempDir())},
		References: map[string]config.ReferenceConfig{
			"named":  {Interface: e2eInterface, LoadBalance: "roundrobin", Retries: &zero, Check: true},
			"nobody": {Interface: "e2e.Nobody"},
		},
		Monitor: mon,
	}, config.WithLogger(logger(t).Named("consumer")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var c, nobody namedClient
	require.NoError(t, cons.Refer(ctx, "named", &c))
	require.NoError(t, cons.Refer(ctx, "nobody", &nobody))
	waitFor(ctx, t, "both providers", func() bool {
		seen := map[string]bool{}
		for i := range 20 {
			if r, err := c.Who(ctx, int64(i*5+1)); err == nil {
				seen[r[:1]] = true
			}
		}
		return seen["A"] && seen["B"]
	})

	// Start counting from here: the reports so far hold the warm-up.
	require.NoError(t, cons.Reporter().Flush(ctx))
	for _, p := range provs {
		require.NoError(t, p.Reporter().Flush(ctx))
	}
	base := coll.tally(t)

	const calls, lost = 300, 7
	ok, failed := map[string]int64{}, map[string]int64{}
	for i := 1; i <= calls; i++ {
		r, err := c.Who(ctx, int64(i))
		if err != nil {
			name, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "remote error (code 7): "), " ")
			require.Contains(t, addrs, name, "a business error: %v", err)
			failed[name]++
			continue
		}
		name, _, _ := strings.Cut(r, ":")
		ok[name]++
	}
	for i := range lost {
		_, err := nobody.Who(ctx, int64(i))
		require.Error(t, err)
	}
	// The ticker reports while the application runs.
	waitFor(ctx, t, "a report on the ticker", func() bool { return coll.count("e2e-consumer") > len(base) })
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, cons.Shutdown(sctx))
	for _, p := range provs {
		require.NoError(t, p.Shutdown(sctx))
	}

	got := coll.tally(t)
	delta := func(k string) tally {
		g, b := got[k], base[k]
		if g == nil {
			t.Fatalf("no rows for %q; have %v", k, keys(got))
		}
		d := tally{calls: g.calls, ok: g.ok, kinds: map[string]int64{}, samples: g.samples}
		for kind, n := range g.kinds {
			d.kinds[kind] = n
		}
		if b != nil {
			d.calls -= b.calls
			d.ok -= b.ok
			d.samples -= b.samples
			for kind, n := range b.kinds {
				d.kinds[kind] -= n
				if d.kinds[kind] == 0 {
					delete(d.kinds, kind)
				}
			}
		}
		return d
	}
	me := "e2e-consumer@127.0.0.1"
	call := delta("consumer " + e2eInterface + "  " + me)
	assert.EqualValues(t, calls, call.calls, "consumer calls")
	assert.EqualValues(t, ok["A"]+ok["B"], call.ok)
	assert.Equal(t, map[string]int64{monitor.KindBusiness: failed["A"] + failed["B"]}, call.kinds)
	assert.EqualValues(t, calls, call.samples)
	none := delta("consumer e2e.Nobody  " + me)
	assert.EqualValues(t, lost, none.calls)
	assert.Equal(t, map[string]int64{monitor.KindNoProvider: lost}, none.kinds)
	for _, name := range []string{"A", "B"} {
		want := tally{calls: ok[name] + failed[name], ok: ok[name], kinds: map[string]int64{}, samples: ok[name] + failed[name]}
		if failed[name] > 0 {
			want.kinds[monitor.KindBusiness] = failed[name]
		}
		assert.Equal(t, want, delta("consumer "+e2eInterface+" "+addrs[name]+" "+me), "attempts to %s", name)
		assert.Equal(t, want, delta("provider "+e2eInterface+" "+addrs[name]+" "+me), "provider %s", name)
		assert.Positive(t, ok[name])
	}
	// Each application's reports are numbered from 1 without a gap.
	coll.mu.Lock()
	defer coll.mu.Unlock()
	seqs := map[string][]uint64{}
	for _, r := range coll.reports {
		seqs[r.Application+"@"+r.Host] = append(seqs[r.Application+"@"+r.Host], r.Seq)
	}
	for who, s := range seqs {
		for i, n := range s {
			require.EqualValues(t, i+1, n, "%s: seqs %v", who, s)
		}
	}
	assert.Contains(t, seqs, "e2e-provider-A@"+addrs["A"], "a provider reports as its exported address")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A monitor at a fixed address that is away when the application starts
// and comes back later: the reports waited, and none was lost.
func TestMonitorAwayThenBackOverTCP(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	provReg := "memory://monitor-away"
	prov, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: provReg}},
		Services:   map[string]config.ServiceConfig{"named": {Interface: e2eInterface}},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	u, err := prov.Export(ctx, "named", named{name: "P"})
	require.NoError(t, err)

	cons, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "away-consumer"},
		References:  map[string]config.ReferenceConfig{"named": {Interface: e2eInterface, URL: u.Address()}},
		Monitor:     config.MonitorConfig{Address: "127.0.0.1:" + strconv.Itoa(port), Interval: time.Hour},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var c namedClient
	require.NoError(t, cons.Refer(ctx, "named", &c))

	made := 0
	for round := range 3 {
		for range 10 + round {
			_, err := c.Who(ctx, 1)
			require.NoError(t, err)
			made++
		}
		require.Error(t, cons.Reporter().Flush(ctx), "the monitor is away")
	}
	assert.Equal(t, 3, cons.Reporter().Stats().Pending)

	coll := &collector{}
	startCollector(ctx, t, "", port, coll)
	for range 4 {
		_, err := c.Who(ctx, 1)
		require.NoError(t, err)
		made++
	}
	waitFor(ctx, t, "the monitor to answer", func() bool { return cons.Reporter().Flush(ctx) == nil })
	st := cons.Reporter().Stats()
	assert.Zero(t, st.Pending)
	assert.Zero(t, st.Dropped)
	var calls int64
	for k, tl := range coll.tally(t) {
		if strings.HasPrefix(k, "consumer "+e2eInterface+"  ") {
			calls += tl.calls
		}
	}
	assert.EqualValues(t, made, calls)
}

// The monitor section is checked.
func TestMonitorConfigErrors(t *testing.T) {
	for _, c := range []struct {
		yaml, want string
	}{
		{"monitor: {interval: 100ms, address: 127.0.0.1:1}", "monitor.interval 100ms: must be at least 1s"},
		{"monitor: {interval: 1s}", "monitor: no address and no registries"},
		{"monitor: {address: x, registries: [nope]}", `monitor.registries: unknown registry "nope"`},
		{"monitor: {adress: x}", "adress"},
		{"monitor: {metrics: 9090}", `monitor.metrics "9090": want host:port`},
	} {
		_, err := config.Parse(strings.NewReader(c.yaml))
		require.Error(t, err, c.yaml)
		assert.Contains(t, err.Error(), c.want, c.yaml)
	}
	cfg, err := config.Parse(strings.NewReader("registries: {zk: {address: 'zookeeper://127.0.0.1:2181'}}\nmonitor: {registries: [zk]}"))
	require.NoError(t, err)
	assert.Equal(t, time.Minute, cfg.Monitor.Interval, "default interval")
	assert.True(t, cfg.Monitor.Reporting())
}

// An application serves its own counts at /metrics when monitor.metrics
// is set, until Shutdown.
func TestApplicationMetricsPage(t *testing.T) {
	ctx := testCtx(t)
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "metered"},
		Services:    map[string]config.ServiceConfig{"named": {Interface: e2eInterface}},
		Monitor:     config.MonitorConfig{Metrics: "127.0.0.1:0"},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	assert.Nil(t, app.Reporter(), "metrics alone report nothing")
	u, err := app.Export(ctx, "named", named{name: "M"})
	require.NoError(t, err)
	cons, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "caller"},
		References:  map[string]config.ReferenceConfig{"named": {Interface: e2eInterface, URL: u.Address()}},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var c namedClient
	require.NoError(t, cons.Refer(ctx, "named", &c))
	for i := range 5 {
		_, err := c.Who(ctx, int64(i))
		require.NoError(t, err)
	}

	get := func() (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+app.MetricsAddr()+"/metrics", nil)
		require.NoError(t, err)
		return http.DefaultClient.Do(req)
	}
	resp, err := get()
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	calls := fams["minidubbo_calls_total"]
	require.NotNil(t, calls)
	require.Len(t, calls.Metric, 1)
	assert.EqualValues(t, 5, calls.Metric[0].Counter.GetValue())
	labels := map[string]string{}
	for _, l := range calls.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, "provider", labels["side"])
	assert.Equal(t, "caller@127.0.0.1", labels["consumer"])
	assert.Equal(t, u.Address(), labels["provider"])
	// The provider counted the bodies it received and, after encoding,
	// the responses it sent.
	assert.Positive(t, fams["minidubbo_received_bytes_total"].Metric[0].Counter.GetValue())
	assert.Positive(t, fams["minidubbo_sent_bytes_total"].Metric[0].Counter.GetValue())

	addr := app.MetricsAddr()
	require.NoError(t, app.Shutdown(ctx))
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the metrics server stops at Shutdown")
}
