package server

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor/store"
)

// ChromiumPath is the Debian chromium package's browser.
const ChromiumPath = "/usr/bin/chromium"

// browser returns a chromedp context on a headless Chromium with a fresh
// profile, stopped when the test ends. Without Chromium the test is
// skipped, except with CI=true where it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is needed with CI=true (apt-get install chromium): %v", err)
		}
		t.Skipf("no chromium at %s (apt-get install chromium)", ChromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	// The bound covers Chromium's start, the first load and the refresh
	// poll (30 s). Under -race with 2 CPU burners at load 28-36 the first
	// load alone took 43 s and 83 s: a 90 s bound left the poll 7 s and
	// failed it ("the page did not refresh: context deadline exceeded").
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	})
	return bctx
}

// page is what the dashboard shows, read from its DOM.
type page struct {
	Methods []struct {
		Side, Application, Service, Method string
		Calls, Failures, QPS, P50, P99     string
	}
	Services []struct {
		Service string
		Charts  []struct {
			Title     string
			Points    string
			Polylines []struct {
				Side   string
				N      string
				Points string
			}
		}
		Slow      []string
		Providers []struct{ Provider, ConsumerCalls, ProviderCalls string }
	}
	Status string
}

const readPage = `(() => {
  const txt = (e, sel) => e.querySelector(sel).textContent;
  return {
    methods: [...document.querySelectorAll('#methods tbody tr')].map(tr => ({
      side: tr.dataset.side, application: tr.dataset.application, service: tr.dataset.service, method: tr.dataset.method,
      calls: txt(tr, '.calls'), failures: txt(tr, '.failures'), qps: txt(tr, '.qps'), p50: txt(tr, '.p50'), p99: txt(tr, '.p99'),
    })),
    services: [...document.querySelectorAll('section.service')].map(s => ({
      service: s.dataset.service,
      charts: [...s.querySelectorAll('svg.chart')].map(c => ({
        title: c.dataset.title, points: c.dataset.points,
        polylines: [...c.querySelectorAll('polyline')].map(p => ({ side: p.dataset.side, n: p.dataset.n, points: p.getAttribute('points') })),
      })),
      slow: [...s.querySelectorAll('table.providers tr.slow')].map(tr => tr.dataset.provider),
      providers: [...s.querySelectorAll('table.providers tbody tr')].map(tr => ({
        provider: tr.dataset.provider, consumerCalls: txt(tr, '.consumer-calls'), providerCalls: txt(tr, '.provider-calls'),
      })),
    })),
    status: document.getElementById('status').textContent,
  };
})()`

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestDashboardInChromium(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t)

	start := time.Now()
	_, err := chromedp.Run(ctx, chromedp.Navigate(f.http.URL+"/"))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(`body[data-loads] section.service svg.chart polyline`))
	require.NoError(t, err)
	p, err := chromedp.Run(ctx, chromedp.Evaluate[page](readPage))
	require.NoError(t, err)
	t.Log("dashboard read in", time.Since(start))

	// The numbers on the page are the report's.
	want, err := f.st.Query(testCtx(t), store.Query{Since: time.Now().Add(-time.Hour), By: store.ByMethod})
	require.NoError(t, err)
	require.Len(t, p.Methods, len(want.Rows), "%+v", p)
	for i, row := range want.Rows {
		got := p.Methods[i]
		assert.Equal(t, []string{row.Side, row.Application, row.Service, row.Method}, []string{got.Side, got.Application, got.Service, got.Method})
		assert.Equal(t, []string{strconv.FormatInt(row.Calls, 10), strconv.FormatInt(row.Failures, 10), num(row.QPS), num(row.P50Ms), num(row.P99Ms)},
			[]string{got.Calls, got.Failures, got.QPS, got.P50, got.P99}, "%s %s %s", row.Side, row.Service, row.Method)
	}
	assert.Contains(t, p.Status, "12 reports from 4 senders, 0 dropped by senders")

	// Each service has its three charts, drawn from a point per minute and side.
	require.Len(t, p.Services, 2)
	assert.Equal(t, "demo.Calc", p.Services[0].Service)
	g := p.Services[1]
	assert.Equal(t, "demo.Greeter", g.Service)
	require.Len(t, g.Charts, 3)
	for i, title := range []string{"QPS", "failure rate", "p99 latency"} {
		c := g.Charts[i]
		assert.Equal(t, title, c.Title)
		assert.Equal(t, "6", c.Points, title)
		require.Len(t, c.Polylines, 2, title)
		for _, pl := range c.Polylines {
			assert.Equal(t, "3", pl.N)
			assert.Regexp(t, `^\d+(\.\d)?,\d+(\.\d)? \d+(\.\d)?,\d+(\.\d)? \d+(\.\d)?,\d+(\.\d)?$`, pl.Points)
		}
	}
	// Providers and consumers side by side, the slow one flagged.
	assert.Equal(t, []string{p3}, g.Slow)
	require.Len(t, g.Providers, 3)
	assert.Equal(t, struct{ Provider, ConsumerCalls, ProviderCalls string }{p1, "180", "180"}, g.Providers[0])
	assert.Equal(t, struct{ Provider, ConsumerCalls, ProviderCalls string }{p3, "183", "183"}, g.Providers[2])

	// It refreshes itself: a new report shows without a reload.
	for _, r := range traffic(time.Now().Add(time.Minute))[8:] {
		r.Seq += 10
		require.NoError(t, f.srv.Collect(testCtx(t), r))
	}
	seen, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.getElementById('status').textContent.startsWith('16 reports')`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').textContent`))
		t.Fatalf("the page did not refresh: %v; it says %q", err, st)
	}
	assert.True(t, seen)
}

// The point of a minute younger than 30 s sits at the chart's right edge:
// drawn in the middle of its minute it fell past the edge, out of sight,
// so right after a demo run the charts looked empty.
func TestChartPointOfCurrentMinuteInside(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t)
	_, err := chromedp.Run(ctx, chromedp.Navigate(f.http.URL+"/"))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(`body[data-loads]`))
	require.NoError(t, err)
	// until is 10 s into the minute of the last point; the chart is 400
	// wide with 46 on the left and 10 on the right for the axes.
	cx, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
  const svg = chart('QPS', 'calls/s', [{side: 'consumer', points: [
    {t: '2026-01-01T11:59:00Z', v: 5}, {t: '2026-01-01T12:00:00Z', v: 7}]}],
    '2026-01-01T11:00:00Z', '2026-01-01T12:00:10Z');
  return [...svg.querySelectorAll('circle')].map(c => +c.getAttribute('cx'));
})()`))
	require.NoError(t, err)
	require.Len(t, cx, 2)
	assert.Equal(t, 390.0, cx[1], "the young minute's point at the right edge")
	assert.Less(t, cx[0], cx[1])
	assert.GreaterOrEqual(t, cx[0], 46.0)
}
