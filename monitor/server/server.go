// Package server is the monitor server's heart: the monitor service that
// receives the applications' reports and stores them (package store), and
// the HTTP side that shows them: a dashboard at /, the report as JSON at
// /api/report, and Prometheus metrics at /metrics. Every asset is embedded;
// the dashboard needs no network.
//
// `minidubbo monitor` exports Collector through the framework and serves
// Handler; this package itself imports no registry or config, so it keeps
// the monitor layer's place in the package order.
package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
)

// Options tune a Server. As in every layer's options: every zero field
// means the default (DefaultOptions shows them); a negative field is
// invalid (Validate).
type Options struct {
	// MaxSeries bounds the label sets /metrics keeps (default
	// DefaultMaxSeries); rows of label sets beyond it are left out of the
	// metrics (they are still stored) and counted in
	// minidubbo_monitor_series_overflow_total.
	MaxSeries int
	// Refresh is how often the dashboard reloads its data (default
	// DefaultRefresh, 5 s).
	Refresh time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults of Options; DefaultOptions returns them all.
const (
	DefaultMaxSeries = 10000
	DefaultRefresh   = 5 * time.Second
)

// DefaultOptions returns the defaults of every field (Now nil: time.Now).
func DefaultOptions() Options {
	return Options{MaxSeries: DefaultMaxSeries, Refresh: DefaultRefresh}
}

// Validate returns an error naming the first negative field.
func (o Options) Validate() error {
	return optcheck.NonNegative("monitor server",
		optcheck.Field{Name: "MaxSeries", Value: int64(o.MaxSeries), Default: DefaultMaxSeries},
		optcheck.Field{Name: "Refresh", Value: int64(o.Refresh), Default: DefaultRefresh},
	)
}

// Server stores reports and serves them. It is safe for concurrent use.
type Server struct {
	st   *store.Store
	opts Options

	reg      *prometheus.Registry
	outcomes *prometheus.CounterVec
	dropped  prometheus.Counter
	overflow prometheus.Counter
	metrics  *callMetrics
}

// New returns a Server over st. The caller keeps owning st. A nil st and
// invalid options (see Options.Validate) are errors.
func New(st *store.Store, o Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("monitor server: nil store (open one with store.Open)")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := DefaultOptions()
	if o.MaxSeries == 0 {
		o.MaxSeries = d.MaxSeries
	}
	if o.Refresh == 0 {
		o.Refresh = d.Refresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{
		st:   st,
		opts: o,
		reg:  prometheus.NewRegistry(),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minidubbo_monitor_reports_total",
			Help: "Reports received by the monitor, by outcome (stored, duplicate, expired, refused).",
		}, []string{"outcome"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "minidubbo_monitor_sender_dropped_reports_total",
			Help: "Reports the applications said they dropped unsent when their buffer overflowed.",
		}),
		overflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "minidubbo_monitor_series_overflow_total",
			Help: "Report rows left out of the call metrics because MaxSeries label sets were already kept.",
		}),
		metrics: &callMetrics{series: map[seriesKey]*series{}, max: o.MaxSeries},
	}
	for _, o := range []string{"stored", "duplicate", "expired", "refused"} {
		s.outcomes.WithLabelValues(o)
	}
	s.reg.MustRegister(s.outcomes, s.dropped, s.overflow, s.metrics)
	return s, nil
}

// Collector returns the monitor service to export: its one method,
// Collect, stores a report.
func (s *Server) Collector() monitor.Collector { return collector{s} }

type collector struct{ s *Server }

func (c collector) Collect(ctx context.Context, r *monitor.Report) error { return c.s.Collect(ctx, r) }

// Collect stores r, once: a report sent again is accepted and ignored. An
// invalid report (store.Validate) is refused with monitor.Refused's error
// saying why, which tells the reporter not to send it again; any other
// error (the store failed) leaves the report to be sent again.
func (s *Server) Collect(ctx context.Context, r *monitor.Report) error {
	o, err := s.st.Add(ctx, r)
	if err != nil {
		s.outcomes.WithLabelValues("refused").Inc()
		if errors.Is(err, store.ErrInvalid) {
			return monitor.Refused(err)
		}
		return err
	}
	s.outcomes.WithLabelValues(o.String()).Inc()
	if o == store.Stored {
		s.dropped.Add(float64(r.Dropped))
		s.overflow.Add(float64(s.metrics.add(r)))
	}
	return nil
}

// callMetrics are the cumulative counts of every stored report since the
// server started, by label set, exposed as Prometheus counters and a
// latency histogram.
type callMetrics struct {
	mu     sync.Mutex
	series map[seriesKey]*series
	max    int
}

type seriesKey struct{ side, application, service, method, provider, consumer string }

type series struct {
	calls, successes  uint64
	failures          [6]uint64 // by store.Kinds
	bytesIn, bytesOut uint64
	elapsed           float64 // seconds
	buckets           []uint64
	count             uint64
}

// Latency buckets of minidubbo_call_duration_seconds, in seconds and in
// microseconds.
var (
	bucketSeconds = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	bucketMicros  = func() []int64 {
		out := make([]int64, len(bucketSeconds))
		for i, b := range bucketSeconds {
			out[i] = int64(b * 1e6)
		}
		return out
	}()
)

var (
	labels    = []string{"side", "application", "service", "method", "provider", "consumer"}
	descCalls = prometheus.NewDesc("minidubbo_calls_total",
		"Calls counted by the applications (on the consumer side, rows with provider=\"\" count calls, the others attempts).", labels, nil)
	descSuccesses = prometheus.NewDesc("minidubbo_call_successes_total", "Calls that ended without an error.", labels, nil)
	descFailures  = prometheus.NewDesc("minidubbo_call_failures_total", "Calls that failed, by kind.", append(labels[:len(labels):len(labels)], "kind"), nil)
	descBytes     = prometheus.NewDesc("minidubbo_call_bytes_total", "Body bytes of calls, by direction (in, out) as the reporting side sees it.", append(labels[:len(labels):len(labels)], "direction"), nil)
	descDuration  = prometheus.NewDesc("minidubbo_call_duration_seconds", "Time of the ended calls.", labels, nil)
)

// add counts the rows of r and returns how many were left out for the
// series bound.
func (m *callMetrics) add(r *monitor.Report) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	left := 0
	for i := range r.Rows {
		w := &r.Rows[i]
		k := seriesKey{string(w.Side), w.Application, store.ServiceKey(w), w.Method, w.Provider, w.Consumer}
		s, ok := m.series[k]
		if !ok {
			if len(m.series) >= m.max {
				left++
				continue
			}
			s = &series{buckets: make([]uint64, len(bucketMicros))}
			m.series[k] = s
		}
		s.calls += uint64(w.Calls)
		s.successes += uint64(w.Successes)
		for j, kind := range store.Kinds {
			s.failures[j] += uint64(w.FailuresByKind[kind])
		}
		s.bytesIn += uint64(w.BytesIn)
		s.bytesOut += uint64(w.BytesOut)
		s.elapsed += float64(w.ElapsedNanos) / 1e9
		h, err := store.HistFromWire(w.Latency)
		if err != nil {
			continue // the store checked it already
		}
		for j, n := range h.CountAtOrBelow(bucketMicros) {
			s.buckets[j] += n
		}
		s.count += uint64(h.Total())
	}
	return left
}

// Describe sends nothing: the metrics are unchecked, their label sets come
// from the reports.
func (m *callMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends the current counts.
func (m *callMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.series {
		lv := []string{k.side, k.application, k.service, k.method, k.provider, k.consumer}
		ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(s.calls), lv...)
		ch <- prometheus.MustNewConstMetric(descSuccesses, prometheus.CounterValue, float64(s.successes), lv...)
		for j, kind := range store.Kinds {
			ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(s.failures[j]), append(lv, kind)...)
		}
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(s.bytesIn), append(lv, "in")...)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(s.bytesOut), append(lv, "out")...)
		b := make(map[float64]uint64, len(bucketSeconds))
		for j, le := range bucketSeconds {
			b[le] = s.buckets[j]
		}
		ch <- prometheus.MustNewConstHistogram(descDuration, s.count, s.elapsed, b, lv...)
	}
}
