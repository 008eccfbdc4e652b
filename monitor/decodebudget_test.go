package monitor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/internal/reporttest"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/serialize"
)

// TestLargeReportWithinDecodeBudget: a report of 2000 rows, each with a
// failure kind and a latency histogram, decodes with the default msgpack
// limits, as the monitor service reads it. Charged what its maps cost it
// needs 4.1 bytes per body byte: with serialize's AllocFactor 3 it was
// refused (serialize TestMsgpackWorstShapesWithinBudget).
func TestLargeReportWithinDecodeBudget(t *testing.T) {
	rows := make([]monitor.Row, 2000)
	for i := range rows {
		rows[i] = reporttest.Row(monitor.Consumer, "shop", fmt.Sprintf("demo.S%d", i), "SayHello", "10.0.0.1:20880", "shop@10.0.0.9",
			reporttest.Latencies(20, time.Millisecond, 80*time.Millisecond), map[string]int64{monitor.KindTimeout: 1})
	}
	r := reporttest.Report("shop", "10.0.0.9", 1, time.Now(), 30*time.Second, rows...)
	s := serialize.NewMsgpack()
	b, err := s.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got monitor.Report
	if err := s.Unmarshal(b, &got); err != nil {
		t.Fatalf("a %d-byte report of %d rows: %v", len(b), len(rows), err)
	}
	if len(got.Rows) != len(rows) || got.Rows[1999].FailuresByKind[monitor.KindTimeout] != 1 {
		t.Fatalf("decoded %d rows", len(got.Rows))
	}
}
