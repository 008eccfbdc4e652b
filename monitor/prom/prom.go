// Package prom serves a monitor's call counts to Prometheus, with the
// official client library: an application's own /metrics page.
package prom

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minidubbo/minidubbo/monitor"
)

// Labels of every series, in this order.
var labels = []string{"application", "side", "service", "version", "group", "method", "provider", "consumer"}

// Collector is a prometheus.Collector of a Monitor's counts since it
// started (monitor.Monitor.Snapshot, read at every scrape):
//
//	minidubbo_calls_total                    calls started
//	minidubbo_failures_total{kind=...}       calls failed, by kind
//	minidubbo_call_duration_seconds          summary of ended calls (count, sum)
//	minidubbo_received_bytes_total           body bytes received
//	minidubbo_sent_bytes_total               body bytes sent
//	minidubbo_calls_in_flight                calls running now
//
// each labelled application, side, service, version, group, method,
// provider and consumer as in monitor.Row (on the consumer side a series
// with provider="" counts calls, the others attempts per provider).
// Latency percentiles are in the reports (monitor.Row.Latency); here the
// summary has count and sum only.
type Collector struct {
	m                                        *monitor.Monitor
	calls, failures, duration, in, out, conc *prometheus.Desc
}

// NewCollector returns a Collector of m (nil: a Collector with no counts).
func NewCollector(m *monitor.Monitor) *Collector {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(slices.Clone(labels), extra...), nil)
	}
	return &Collector{
		m:        m,
		calls:    d("minidubbo_calls_total", "Calls started."),
		failures: d("minidubbo_failures_total", "Calls that ended with an error, by kind.", "kind"),
		duration: d("minidubbo_call_duration_seconds", "Time of the ended calls."),
		in:       d("minidubbo_received_bytes_total", "Body bytes received (requests on the provider side, responses on the consumer side)."),
		out:      d("minidubbo_sent_bytes_total", "Body bytes sent."),
		conc:     d("minidubbo_calls_in_flight", "Calls running now."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.calls, c.failures, c.duration, c.in, c.out, c.conc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.m == nil {
		return // a Collector of no Monitor has no counts
	}
	app, _ := c.m.Application()
	for _, s := range c.m.Snapshot() {
		lv := []string{app, string(s.Side), s.Service, s.Version, s.Group, s.Method, s.Provider, s.Consumer}
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(s.Calls), lv...)
		for _, kind := range []string{monitor.KindBusiness, monitor.KindTimeout, monitor.KindNoProvider, monitor.KindConnection, monitor.KindBusy, monitor.KindOther} {
			ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.FailuresByKind[kind]), append(lv, kind)...)
		}
		ch <- prometheus.MustNewConstSummary(c.duration, uint64(s.Successes+s.Failures), s.Elapsed.Seconds(), nil, lv...)
		ch <- prometheus.MustNewConstMetric(c.in, prometheus.CounterValue, float64(s.BytesIn), lv...)
		ch <- prometheus.MustNewConstMetric(c.out, prometheus.CounterValue, float64(s.BytesOut), lv...)
		ch <- prometheus.MustNewConstMetric(c.conc, prometheus.GaugeValue, float64(s.Concurrent), lv...)
	}
}

// Handler returns an http.Handler of the Prometheus text format with m's
// counts, the Go runtime's and the process's metrics, and those of extra.
// An extra collector already there (the Go collector passed again) is
// served once; one that Prometheus refuses (a metric of the same name
// with other labels) makes every scrape fail with status 500 and the
// reason, instead of a panic here. Nil extras are skipped.
func Handler(m *monitor.Monitor, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(m), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var refused []string
	for i, c := range extra {
		if c == nil {
			continue
		}
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				continue
			}
			refused = append(refused, fmt.Sprintf("extra collector %d (%T): %v", i, c, err))
		}
	}
	if len(refused) > 0 {
		msg := "prom: " + strings.Join(refused, "; ")
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, msg, http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
