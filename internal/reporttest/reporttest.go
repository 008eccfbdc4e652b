// Package reporttest builds monitor reports from latencies, for the tests
// of the monitor server and its store.
package reporttest

import (
	"time"

	"github.com/minidubbo/minidubbo/monitor"
)

// Row returns a row of calls that took the given times: every call counted
// once, the failures (by kind) taken from the first calls, the histogram,
// elapsed sum and maximum computed from the latencies.
func Row(side monitor.Side, app, service, method, provider, consumer string, latencies []time.Duration, failures map[string]int64) monitor.Row {
	h := monitor.NewHistogram()
	r := monitor.Row{
		Side: side, Application: app, Service: service, Method: method,
		Provider: provider, Consumer: consumer,
		Calls: int64(len(latencies)), FailuresByKind: failures,
		BytesIn: int64(len(latencies)) * 40, BytesOut: int64(len(latencies)) * 30,
		MaxConcurrent: 1,
	}
	for _, n := range failures {
		r.Failures += n
	}
	r.Successes = r.Calls - r.Failures
	for _, d := range latencies {
		r.ElapsedNanos += int64(d)
		r.MaxNanos = max(r.MaxNanos, int64(d))
		if err := h.RecordValue(max(d.Microseconds(), 1)); err != nil {
			panic(err)
		}
	}
	r.Latency = monitor.EncodeHistogram(h)
	return r
}

// Latencies returns n latencies spread evenly from lo to hi.
func Latencies(n int, lo, hi time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		if n == 1 {
			out[i] = lo
			continue
		}
		out[i] = lo + (hi-lo)*time.Duration(i)/time.Duration(n-1)
	}
	return out
}

// Report wraps rows in a report of app@host covering [start, start+interval).
func Report(app, host string, seq uint64, start time.Time, interval time.Duration, rows ...monitor.Row) *monitor.Report {
	return &monitor.Report{Application: app, Host: host, Seq: seq, Start: start, End: start.Add(interval), Rows: rows}
}
