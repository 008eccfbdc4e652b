package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/internal/reporttest"
	"github.com/minidubbo/minidubbo/monitor"
)

// benchRows are one interval of an application with 100 keys (10
// methods, 10 peers), 50 calls each.
var benchRows = sync.OnceValue(func() []monitor.Row {
	rows := make([]monitor.Row, 0, 100)
	lat := reporttest.Latencies(50, time.Millisecond, 30*time.Millisecond)
	for m := range 10 {
		for p := range 10 {
			rows = append(rows, reporttest.Row(monitor.Provider, "bench", "demo.Bench", fmt.Sprintf("M%d", m),
				"10.0.0.1:20880", fmt.Sprintf("c%d@10.0.0.%d", p, p), lat, nil))
		}
	}
	return rows
})

func benchReport(seq uint64, start time.Time) *monitor.Report {
	return reporttest.Report("bench", "10.0.0.1:20880", seq, start, time.Second, benchRows()...)
}

// BenchmarkAdd stores a report of 100 rows; every 60 reports fill a new
// minute, the others add to existing rows (the histogram merged in SQL).
func BenchmarkAdd(b *testing.B) {
	c := &clock{t: t0}
	s, err := Open(b.TempDir(), Options{Now: c.now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := t0.Add(time.Duration(i) * time.Second)
		c.set(start)
		if _, err := s.Add(ctx, benchReport(uint64(i+1), start)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/row")
}

// BenchmarkQuery groups an hour of those reports (one a second, 360,000
// report rows in 6,000 minute rows) by method.
func BenchmarkQuery(b *testing.B) {
	c := &clock{t: t0}
	s, err := Open(b.TempDir(), Options{Now: c.now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	for i := range 3600 {
		start := t0.Add(time.Duration(i) * time.Second)
		c.set(start)
		r := benchReport(uint64(i+1), start)
		if i%60 != 0 { // keep the setup short: one report a minute carries the rows
			r.Rows = nil
		}
		if _, err := s.Add(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		sum, err := s.Query(ctx, Query{Since: t0, Until: t0.Add(time.Hour), By: ByMethod})
		if err != nil || len(sum.Rows) != 10 {
			b.Fatal(err, len(sum.Rows))
		}
	}
}
