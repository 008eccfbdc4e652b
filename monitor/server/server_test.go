package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/reporttest"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const (
	greeter = "demo.Greeter"
	calc    = "demo.Calc"
	shop    = "shop@10.0.0.9"
	p1      = "10.0.0.1:20880"
	p2      = "10.0.0.2:20880"
	p3      = "10.0.0.3:20880"
)

// traffic is three minutes of a consumer calling demo.Greeter on three
// providers (p3 slow) and demo.Calc on one, as the four processes report it.
func traffic(now time.Time) []*monitor.Report {
	var out []*monitor.Report
	ms := time.Millisecond
	for i := range 3 {
		start := now.Add(time.Duration(i-3) * time.Minute).Truncate(time.Minute).Add(10 * time.Second)
		seq := uint64(i + 1)
		n := 30 * (i + 1)
		out = append(out,
			reporttest.Report("shop", "10.0.0.9", seq, start, 30*time.Second,
				reporttest.Row(monitor.Consumer, "shop", greeter, "SayHello", "", shop,
					reporttest.Latencies(3*n, ms, 80*ms), map[string]int64{monitor.KindTimeout: int64(i)}),
				reporttest.Row(monitor.Consumer, "shop", greeter, "SayHello", p1, shop, reporttest.Latencies(n, ms, 5*ms), nil),
				reporttest.Row(monitor.Consumer, "shop", greeter, "SayHello", p2, shop, reporttest.Latencies(n, ms, 6*ms), nil),
				reporttest.Row(monitor.Consumer, "shop", greeter, "SayHello", p3, shop, reporttest.Latencies(n+i, 20*ms, 80*ms),
					map[string]int64{monitor.KindTimeout: int64(i)}),
				reporttest.Row(monitor.Consumer, "shop", calc, "Add", "", shop, reporttest.Latencies(10, ms, 2*ms), nil),
				reporttest.Row(monitor.Consumer, "shop", calc, "Add", p1, shop, reporttest.Latencies(10, ms, 2*ms), nil),
			),
			reporttest.Report("hello-provider", p1, seq, start, 30*time.Second,
				reporttest.Row(monitor.Provider, "hello-provider", greeter, "SayHello", p1, shop, reporttest.Latencies(n, ms, 4*ms), nil),
				reporttest.Row(monitor.Provider, "hello-provider", calc, "Add", p1, shop, reporttest.Latencies(10, ms, 2*ms), nil)),
			reporttest.Report("hello-provider", p2, seq, start, 30*time.Second,
				reporttest.Row(monitor.Provider, "hello-provider", greeter, "SayHello", p2, shop, reporttest.Latencies(n, ms, 5*ms), nil)),
			reporttest.Report("hello-provider", p3, seq, start, 30*time.Second,
				reporttest.Row(monitor.Provider, "hello-provider", greeter, "SayHello", p3, shop, reporttest.Latencies(n+i, 20*ms, 79*ms), nil)),
		)
	}
	return out
}

type fixture struct {
	srv     *Server
	http    *httptest.Server
	st      *store.Store
	reports []*monitor.Report
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	srv, err := New(st, Options{Refresh: 500 * time.Millisecond})
	require.NoError(t, err)
	f := &fixture{srv: srv, st: st, reports: traffic(time.Now())}
	for _, r := range f.reports {
		require.NoError(t, srv.Collector().Collect(testCtx(t), r))
	}
	f.http = httptest.NewServer(srv.Handler())
	t.Cleanup(f.http.Close)
	return f
}

func (f *fixture) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(f.http.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

type rowKey struct{ side, app, service, method, provider, consumer string }

// sent adds up the rows of the reports by key, as /api/report should.
func sent(reports []*monitor.Report) map[rowKey]store.Row {
	out := map[rowKey]store.Row{}
	for _, r := range reports {
		for _, w := range r.Rows {
			k := rowKey{string(w.Side), w.Application, w.Service, w.Method, w.Provider, w.Consumer}
			s := out[k]
			s.Calls += w.Calls
			s.Successes += w.Successes
			s.Failures += w.Failures
			s.BytesIn += w.BytesIn
			s.BytesOut += w.BytesOut
			if s.FailuresByKind == nil {
				s.FailuresByKind = map[string]int64{}
			}
			for kind, n := range w.FailuresByKind {
				if n != 0 {
					s.FailuresByKind[kind] += n
				}
			}
			out[k] = s
		}
	}
	return out
}

func TestAPIReportEqualsTheReportsSent(t *testing.T) {
	f := newFixture(t)
	// A report sent again (a retry after a lost answer) counts once.
	require.NoError(t, f.srv.Collect(testCtx(t), f.reports[0]))

	code, body := f.get(t, "/api/report?since=1h")
	require.Equal(t, http.StatusOK, code, string(body))
	var sum store.Summary
	require.NoError(t, json.Unmarshal(body, &sum))
	want := sent(f.reports)
	require.Len(t, sum.Rows, len(want))
	for _, row := range sum.Rows {
		k := rowKey{row.Side, row.Application, row.Service, row.Method, row.Provider, row.Consumer}
		w, ok := want[k]
		require.True(t, ok, "unexpected row %+v", k)
		assert.Equal(t, w.Calls, row.Calls, "%+v", k)
		assert.Equal(t, w.Successes, row.Successes, "%+v", k)
		assert.Equal(t, w.Failures, row.Failures, "%+v", k)
		assert.Equal(t, w.FailuresByKind, row.FailuresByKind, "%+v", k)
		assert.Equal(t, w.BytesIn, row.BytesIn, "%+v", k)
		assert.Equal(t, w.BytesOut, row.BytesOut, "%+v", k)
		assert.Positive(t, row.QPS)
		assert.Positive(t, row.P99Ms)
	}

	// The JSON has exactly the shape.
	var raw struct {
		Since, Until string
		Rows         []map[string]any
	}
	require.NoError(t, json.Unmarshal(body, &raw))
	_, err := time.Parse(time.RFC3339, raw.Since)
	require.NoError(t, err)
	var keys []string
	for k := range raw.Rows[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"application", "avg_ms", "bytes_in", "bytes_out", "calls", "consumer", "failures",
		"failures_by_kind", "max_ms", "method", "p50_ms", "p99_ms", "provider", "qps", "service", "side", "successes"}, keys)

	// Filtered by service and grouped.
	code, body = f.get(t, "/api/report?since=10m&service=demo.Calc&by=method")
	require.Equal(t, http.StatusOK, code, string(body))
	sum = store.Summary{}
	require.NoError(t, json.Unmarshal(body, &sum))
	require.Len(t, sum.Rows, 2)
	assert.Equal(t, []int64{30, 30}, []int64{sum.Rows[0].Calls, sum.Rows[1].Calls})
	assert.Equal(t, []string{"consumer", "provider"}, []string{sum.Rows[0].Side, sum.Rows[1].Side})

	code, body = f.get(t, "/api/status?since=1h")
	require.Equal(t, http.StatusOK, code)
	var st store.Stats
	require.NoError(t, json.Unmarshal(body, &st))
	assert.EqualValues(t, 12, st.Reports)
	assert.EqualValues(t, 4, st.Senders)
}

func TestAPIRefusesBadParameters(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/api/report?since=yesterday":  `since \"yesterday\": want a duration`,
		"/api/report?since=-1h":        "want a duration above 0",
		"/api/report?by=host":          `unknown grouping \"host\" (known: provider, consumer, method)`,
		"/api/report?servce=demo.Calc": `unknown parameter \"servce\" (known: since, until, service, by)`,
		"/api/service?since=1h":        "service is required",
		"/api/status?since=1x":         `since \"1x\"`,
	} {
		code, body := f.get(t, path)
		assert.Equal(t, http.StatusBadRequest, code, path)
		assert.Contains(t, string(body), want, path)
	}
	code, _ := f.get(t, "/nothing-here")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestServiceViewFlagsTheSlowProvider(t *testing.T) {
	f := newFixture(t)
	code, body := f.get(t, "/api/service?service=demo.Greeter&since=1h")
	require.Equal(t, http.StatusOK, code, string(body))
	var v ServiceView
	require.NoError(t, json.Unmarshal(body, &v))
	require.Len(t, v.Providers, 3)
	var slow []string
	for _, p := range v.Providers {
		if p.Slow {
			slow = append(slow, p.Provider)
		}
	}
	assert.Equal(t, []string{p3}, slow)
	assert.Equal(t, ProviderCount{Provider: p1, ConsumerCalls: 180, ProviderCalls: 180,
		ConsumerP99Ms: v.Providers[0].ConsumerP99Ms, ProviderP99Ms: v.Providers[0].ProviderP99Ms}, v.Providers[0])
	assert.EqualValues(t, 183, v.Providers[2].ConsumerCalls)
	assert.EqualValues(t, 3, v.Providers[2].ConsumerFailures)
	assert.Equal(t, []ConsumerCount{{Consumer: shop, ConsumerCalls: 540, ProviderCalls: 543}}, v.Consumers)
	require.Len(t, v.Series["consumer"], 3)
	require.Len(t, v.Series["provider"], 3)
	assert.EqualValues(t, []int64{90, 180, 270}, []int64{v.Series["consumer"][0].Calls, v.Series["consumer"][1].Calls, v.Series["consumer"][2].Calls})
	assert.Equal(t, 3.0, v.Series["consumer"][0].QPS, "90 calls over the 30 s of the reports")

	// The rule alone.
	for _, tc := range []struct {
		name string
		ps   []ProviderCount
		slow []bool
	}{
		{"under twice", []ProviderCount{{ProviderCalls: 100, ProviderP99Ms: 5}, {ProviderCalls: 100, ProviderP99Ms: 9.9}}, []bool{false, false}},
		{"over twice", []ProviderCount{{ProviderCalls: 100, ProviderP99Ms: 5}, {ProviderCalls: 100, ProviderP99Ms: 10.5}}, []bool{false, true}},
		{"five times, not 2 ms above", []ProviderCount{{ProviderCalls: 100, ProviderP99Ms: 0.3}, {ProviderCalls: 100, ProviderP99Ms: 1.5}}, []bool{false, false}},
		{"no peers", []ProviderCount{{ProviderCalls: 100, ProviderP99Ms: 90}}, []bool{false}},
		{"too few calls to judge", []ProviderCount{{ProviderCalls: 100, ProviderP99Ms: 5}, {ProviderCalls: 19, ProviderP99Ms: 90}}, []bool{false, false}},
		{"consumers' view first", []ProviderCount{
			{ConsumerCalls: 100, ConsumerP99Ms: 5, ProviderCalls: 100, ProviderP99Ms: 50},
			{ConsumerCalls: 100, ConsumerP99Ms: 5, ProviderCalls: 100, ProviderP99Ms: 1},
		}, []bool{false, false}},
		{"lower median of the others", []ProviderCount{
			{ProviderCalls: 100, ProviderP99Ms: 5}, {ProviderCalls: 100, ProviderP99Ms: 50}, {ProviderCalls: 100, ProviderP99Ms: 50},
		}, []bool{false, true, true}},
	} {
		flagSlow(tc.ps)
		var got []bool
		for _, p := range tc.ps {
			got = append(got, p.Slow)
		}
		assert.Equal(t, tc.slow, got, tc.name)
	}
}

func TestMetricsParse(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.srv.Collect(testCtx(t), f.reports[1]), "a duplicate")
	bad := *f.reports[1]
	bad.Seq = 99
	bad.Rows = []monitor.Row{{Side: "sideways", Service: "s", Method: "m"}}
	require.ErrorContains(t, f.srv.Collect(testCtx(t), &bad), "unknown side")

	code, body := f.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)

	find := func(name string, labels map[string]string) *dto.Metric {
		t.Helper()
		fam, ok := fams[name]
		require.True(t, ok, "no %s in\n%s", name, body)
	next:
		for _, m := range fam.Metric {
			got := map[string]string{}
			for _, l := range m.Label {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m
		}
		t.Fatalf("no %s%v", name, labels)
		return nil
	}
	want := sent(f.reports)
	for k, w := range want {
		lv := map[string]string{"side": k.side, "application": k.app, "service": k.service, "method": k.method,
			"provider": k.provider, "consumer": k.consumer}
		assert.Equal(t, float64(w.Calls), find("minidubbo_calls_total", lv).GetCounter().GetValue(), "%+v", k)
		h := find("minidubbo_call_duration_seconds", lv).GetHistogram()
		assert.Equal(t, uint64(w.Calls), h.GetSampleCount(), "every call ended: %+v", k)
		b := h.GetBucket()
		assert.Equal(t, h.GetSampleCount(), b[len(b)-1].GetCumulativeCount(), "all under 10 s")
		lv["kind"] = monitor.KindTimeout
		assert.Equal(t, float64(w.FailuresByKind[monitor.KindTimeout]), find("minidubbo_call_failures_total", lv).GetCounter().GetValue())
	}
	for outcome, n := range map[string]float64{"stored": 12, "duplicate": 1, "refused": 1, "expired": 0} {
		assert.Equal(t, n, find("minidubbo_monitor_reports_total", map[string]string{"outcome": outcome}).GetCounter().GetValue(), outcome)
	}
}

func TestMetricsSeriesBound(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	srv, err := New(st, Options{MaxSeries: 2})
	require.NoError(t, err)
	for _, r := range traffic(time.Now()) {
		require.NoError(t, srv.Collect(testCtx(t), r))
	}
	srv.metrics.mu.Lock()
	n := len(srv.metrics.series)
	srv.metrics.mu.Unlock()
	assert.Equal(t, 2, n)
	var m dto.Metric
	require.NoError(t, srv.overflow.Write(&m))
	assert.Equal(t, float64(30-2*3), m.GetCounter().GetValue(), "of 30 rows, all but the 3 of each of the 2 label sets kept")
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     now.Add(-time.Hour),
		"10m":                  now.Add(-10 * time.Minute),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2026-11-30T11:00:00Z": now.Add(-time.Hour),
	} {
		got, err := ParseSince(in, now, time.Hour)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"0s", "400d", "xd", "soon"} {
		_, err := ParseSince(in, now, time.Hour)
		assert.Error(t, err, in)
	}
}
