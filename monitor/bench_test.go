package monitor_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
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
	var pf *monitor.ProviderFilter
	if m != nil {
		pf = m.ProviderFilter()
		served = protocol.Chain(prov, pf)
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
