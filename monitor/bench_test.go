package monitor_test

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
)

type echoService struct{}

func (echoService) Echo(_ context.Context, s string) (string, error) { return s, nil }

type echoStub struct {
	Echo func(ctx context.Context, s string) (string, error)
}

// echoPair exports echoService on loopback TCP and returns a stub calling
// it. With m, the calls are counted the way an application counts them:
// a provider filter on the export, an attempt filter on the provider's
// invoker and a call filter above it.
func echoPair(b *testing.B, m *monitor.Monitor) *echoStub {
	p, err := dubbo.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "bench.Echo", nil)
	prov, err := proxy.NewProvider(u, echoService{})
	if err != nil {
		b.Fatal(err)
	}
	var served protocol.Invoker = prov
	var pf *monitor.ProviderRecorder
	if m != nil {
		pf = m.ProviderRecorder()
		served = protocol.Chain(prov, filter.NewCount(pf))
	}
	exp, err := p.Export(served)
	if err != nil {
		b.Fatal(err)
	}
	real := exp.(*dubbo.Exporter).URL()
	inv, err := p.Refer(real.With(protocol.KeyRemoteApplication, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	if m != nil {
		pf.SetAddr(real.Address())
		inv = protocol.Chain(protocol.Chain(inv, m.AttemptFilter(real.Address())), m.CallFilter())
	}
	var s echoStub
	if err := proxy.Refer(&s, inv); err != nil {
		b.Fatal(err)
	}
	return &s
}

// BenchmarkCountingOverhead is a 581-byte echo over loopback TCP, both
// sides in this process, with counting off and on (both sides counted: a
// call, an attempt and a provider row per call), from 1 and from 100
// concurrent callers. Run with -count to see the spread.
func BenchmarkCountingOverhead(b *testing.B) {
	payload := strings.Repeat("x", 581)
	ctx := context.Background()
	for _, callers := range []int{1, 100} {
		for _, on := range []bool{false, true} {
			name := "c" + strconv.Itoa(callers) + "/off"
			var m *monitor.Monitor
			if on {
				name = "c" + strconv.Itoa(callers) + "/on"
				m = monitor.New(monitor.WithIdentity("bench", "127.0.0.1"))
			}
			b.Run(name, func(b *testing.B) {
				s := echoPair(b, m)
				call := func() {
					r, err := s.Echo(ctx, payload)
					if err != nil || len(r) != len(payload) {
						b.Errorf("reply of %d bytes, %v", len(r), err)
					}
				}
				call()
				b.ReportAllocs()
				b.ResetTimer()
				if callers == 1 {
					for b.Loop() {
						call()
					}
					return
				}
				b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						call()
					}
				})
			})
		}
	}
}

// BenchmarkTakeReport is the cost of one report of a monitor that has
// seen 100 keys (10 methods x 10 providers), each with calls in the
// interval.
func BenchmarkTakeReport(b *testing.B) {
	m := monitor.New(monitor.WithIdentity("bench", "127.0.0.1"))
	ctx := context.Background()
	var next protocol.Invoker = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{}, nil
	}}
	var filters []protocol.Filter
	for p := range 10 {
		filters = append(filters, m.AttemptFilter("10.0.0."+strconv.Itoa(p)+":20880"))
	}
	invs := make([]*protocol.Invocation, 10)
	for i := range invs {
		invs[i] = &protocol.Invocation{Service: "bench.Svc", Method: "M" + strconv.Itoa(i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for _, f := range filters {
			for _, inv := range invs {
				_, _ = f.Invoke(ctx, inv, next)
			}
		}
		b.StartTimer()
		r := m.TakeReport()
		if len(r.Rows) != 100 {
			b.Fatalf("%d rows", len(r.Rows))
		}
	}
}

// BenchmarkCountingOverheadInterleaved measures the cost of counting on a
// busy machine, where two benchmarks run one after the other see
// different loads: 100 callers alternate calls with counting off and on,
// so both see the same load, and the mean call time of each is reported
// (at a fixed number of callers, throughput is inversely proportional to
// it). overhead-% is (on/off - 1) x 100.
func BenchmarkCountingOverheadInterleaved(b *testing.B) {
	payload := strings.Repeat("x", 581)
	ctx := context.Background()
	off := echoPair(b, nil)
	on := echoPair(b, monitor.New(monitor.WithIdentity("bench", "127.0.0.1")))
	var mu sync.Mutex
	var sum [2]time.Duration
	var n [2]int64
	b.ReportAllocs()
	b.SetParallelism(max(100/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		var s [2]time.Duration
		var c [2]int64
		for i := 0; pb.Next(); i++ {
			k := i & 1
			stub := off
			if k == 1 {
				stub = on
			}
			start := time.Now()
			r, err := stub.Echo(ctx, payload)
			s[k] += time.Since(start)
			c[k]++
			if err != nil || len(r) != len(payload) {
				b.Errorf("reply of %d bytes, %v", len(r), err)
			}
		}
		mu.Lock()
		for k := range 2 {
			sum[k] += s[k]
			n[k] += c[k]
		}
		mu.Unlock()
	})
	if n[0] > 0 && n[1] > 0 {
		offMean := float64(sum[0]) / float64(n[0])
		onMean := float64(sum[1]) / float64(n[1])
		b.ReportMetric(offMean/1e3, "off-µs/call")
		b.ReportMetric(onMean/1e3, "on-µs/call")
		b.ReportMetric((onMean/offMean-1)*100, "overhead-%")
	}
}

// BenchmarkCountingStack is everything counting adds to one call when
// both sides are counted: the call filter, the attempt filter, the
// provider filter and the response-size callback, around an invoker that
// does nothing. Compare with the CPU time of a whole call.
func BenchmarkCountingStack(b *testing.B) {
	m := monitor.New(monitor.WithIdentity("bench", "127.0.0.1"))
	pf := m.ProviderRecorder()
	pf.SetAddr("127.0.0.1:20880")
	res := &protocol.Result{RequestBytes: 600, ResponseBytes: 600}
	var nop protocol.Invoker = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return res, nil }}
	provider := protocol.Chain(nop, filter.NewCount(pf))
	consumer := protocol.Chain(protocol.Chain(nop, m.AttemptFilter("127.0.0.1:20880")), m.CallFilter())
	cinv := &protocol.Invocation{Service: "bench.Echo", Method: "Echo"}
	pinv := &protocol.Invocation{Service: "bench.Echo", Method: "Echo", RequestBytes: 600,
		RemoteAddr:  &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
		Attachments: map[string]string{protocol.KeyRemoteApplication: "bench"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = consumer.Invoke(ctx, cinv)
		_, _ = provider.Invoke(ctx, pinv)
		pf.ResponseSent(pinv, 600)
	}
}
