package monitor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
)

// sampleReport has every field set, including a latency histogram.
func sampleReport(t *testing.T) *monitor.Report {
	h := monitor.NewHistogram()
	for v := int64(1); v <= 500; v++ {
		require.NoError(t, h.RecordValue(v*7))
	}
	start := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	return &monitor.Report{
		Application: "hello-consumer", Host: "127.0.0.1:20880",
		Start: start, End: start.Add(time.Minute),
		Seq: 42, Dropped: 3,
		Rows: []monitor.Row{{
			Side: monitor.Consumer, Application: "hello-consumer",
			Service: "demo.hello.Greeter", Version: "1.0", Group: "g", Method: "SayHello",
			Provider: "127.0.0.1:20881", Consumer: "hello-consumer@127.0.0.1",
			Calls: 500, Successes: 497, Failures: 3,
			BytesIn: 12345, BytesOut: 54321,
			FailuresByKind: map[string]int64{monitor.KindTimeout: 2, monitor.KindBusiness: 1},
			ElapsedNanos:   987654321, MaxNanos: 3500000,
			Concurrent: 1, MaxConcurrent: 17,
			Latency: monitor.EncodeHistogram(h),
		}, {
			Side: monitor.Provider, Service: "demo.hello.Greeter", Method: "SayHello",
		}},
	}
}

// requireSameReport compares two reports, times by instant.
func requireSameReport(t *testing.T, want, got *monitor.Report) {
	t.Helper()
	require.True(t, want.Start.Equal(got.Start), "start %v, want %v", got.Start, want.Start)
	require.True(t, want.End.Equal(got.End), "end %v, want %v", got.End, want.End)
	w, g := *want, *got
	w.Start, w.End, g.Start, g.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	require.Equal(t, w, g)
}

func TestReportMsgpackRoundTrip(t *testing.T) {
	want := sampleReport(t)
	ser := serialize.NewMsgpack()
	data, err := ser.Marshal(want)
	require.NoError(t, err)
	var got monitor.Report
	require.NoError(t, ser.Unmarshal(data, &got))
	requireSameReport(t, want, &got)
	h, err := got.Rows[0].Latency.Decode()
	require.NoError(t, err)
	assert.EqualValues(t, 500, h.TotalCount())
}

// collector stores what it is sent.
type collector struct {
	mu      sync.Mutex
	reports []*monitor.Report
}

func (c *collector) Collect(_ context.Context, r *monitor.Report) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports = append(c.reports, r)
	return nil
}

var _ monitor.Collector = (*collector)(nil)

// TestCollectOverDubbo sends a report as the argument of a real call: the
// monitor service exported with the dubbo protocol on loopback TCP and
// called through the CollectorClient stub.
func TestCollectOverDubbo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p, err := dubbo.New(nil)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, monitor.ServiceName, nil)
	impl := &collector{}
	prov, err := proxy.NewProvider(u, impl)
	require.NoError(t, err)
	assert.Equal(t, []string{"Collect"}, prov.Methods())
	exp, err := p.Export(prov)
	require.NoError(t, err)
	inv, err := p.Refer(exp.(*dubbo.Exporter).URL())
	require.NoError(t, err)

	var c monitor.CollectorClient
	require.NoError(t, proxy.Refer(&c, inv))
	want := sampleReport(t)
	require.NoError(t, c.Collect(ctx, want))
	impl.mu.Lock()
	defer impl.mu.Unlock()
	require.Len(t, impl.reports, 1)
	requireSameReport(t, want, impl.reports[0])
}
