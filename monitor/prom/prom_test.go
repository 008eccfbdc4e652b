package prom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/prom"
	"github.com/minidubbo/minidubbo/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMetricsPageParses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m := monitor.New(monitor.WithIdentity("shop", "127.0.0.1"))
	var ok, bad protocol.Invoker = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{RequestBytes: 5, ResponseBytes: 9}, nil
	}}, protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return nil, errors.New("nope")
	}}
	f := m.AttemptFilter("127.0.0.1:20880")
	inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"}
	for range 7 {
		_, err := f.Invoke(ctx, inv, ok)
		require.NoError(t, err)
	}
	for range 2 {
		_, err := f.Invoke(ctx, inv, bad)
		require.Error(t, err)
	}

	srv := httptest.NewServer(prom.Handler(m))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "the page parses as Prometheus text format")

	calls := fams["minidubbo_calls_total"]
	require.NotNil(t, calls)
	require.Len(t, calls.Metric, 1)
	got := map[string]string{}
	for _, l := range calls.Metric[0].Label {
		got[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, map[string]string{"application": "shop", "side": "consumer", "service": "demo.Greeter", "version": "", "group": "",
		"method": "SayHello", "provider": "127.0.0.1:20880", "consumer": "shop@127.0.0.1"}, got)
	assert.EqualValues(t, 9, calls.Metric[0].Counter.GetValue())
	for _, fm := range fams["minidubbo_failures_total"].Metric {
		for _, l := range fm.Label {
			if l.GetName() == "kind" {
				want := 0.0
				if l.GetValue() == monitor.KindOther {
					want = 2
				}
				assert.Equal(t, want, fm.Counter.GetValue(), l.GetValue())
			}
		}
	}
	assert.EqualValues(t, 9, fams["minidubbo_call_duration_seconds"].Metric[0].Summary.GetSampleCount())
	assert.EqualValues(t, 7*9, fams["minidubbo_received_bytes_total"].Metric[0].Counter.GetValue())
	assert.EqualValues(t, 7*5, fams["minidubbo_sent_bytes_total"].Metric[0].Counter.GetValue())
	assert.Contains(t, fams, "go_goroutines")
}

// clash is a collector whose metric takes the name of the monitor's
// calls counter with other labels: Prometheus refuses it.
type clash struct{ d *prometheus.Desc }

func (c clash) Describe(ch chan<- *prometheus.Desc) { ch <- c.d }
func (c clash) Collect(chan<- prometheus.Metric)    {}

// TestHandlerExtraCollectors: an extra collector already there is served
// once, a nil one is skipped, and one Prometheus refuses makes the page
// answer 500 with the reason; none panics (Handler used MustRegister).
func TestHandlerExtraCollectors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m := monitor.New(monitor.WithIdentity("shop", "127.0.0.1"))
	get := func(h http.Handler) (int, string) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	var h http.Handler
	require.NotPanics(t, func() { h = prom.Handler(m, collectors.NewGoCollector(), nil) })
	code, body := get(h)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 1, strings.Count(body, "\ngo_goroutines "), "the Go collector once")

	bad := clash{prometheus.NewDesc("minidubbo_calls_total", "clash", []string{"other"}, nil)}
	require.NotPanics(t, func() { h = prom.Handler(m, bad) })
	code, body = get(h)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "prom: extra collector 0 (prom_test.clash): ")
	assert.Contains(t, body, "minidubbo_calls_total")
}

// A Collector of no Monitor collects nothing; it panicked on a nil
// pointer when a registry gathered it.
func TestCollectorNilMonitor(t *testing.T) {
	ch := make(chan prometheus.Metric, 16)
	require.NotPanics(t, func() { prom.NewCollector(nil).Collect(ch) })
	assert.Zero(t, len(ch))
}
