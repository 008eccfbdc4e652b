package prom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/prom"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// An application serves its own counts to Prometheus, without a monitor
// server: mount the handler on its HTTP server (http.Handle("/metrics",
// prom.Handler(m))) and point Prometheus at it. The page also carries the
// Go runtime's and the process's metrics.
func ExampleHandler() {
	m := monitor.New(monitor.WithIdentity("shop", "10.0.0.9"))
	greeter := protocol.Chain(protocol.InvokerFunc{F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if inv.Args[0] == "" {
			return nil, service.Errorf(service.CodeInvalidArgument, "empty name")
		}
		return &protocol.Result{Value: "hello"}, nil
	}}, m.Filter(monitor.Consumer))
	for _, name := range []string{"ann", "bob", ""} {
		_, _ = greeter.Invoke(context.Background(), &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{name}})
	}

	web := httptest.NewServer(prom.Handler(m))
	defer web.Close()
	resp, err := web.Client().Get(web.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	// Here the calls and the failures that are not 0.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "minidubbo_calls_total") ||
			strings.HasPrefix(line, "minidubbo_failures_total") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// minidubbo_calls_total{application="shop",consumer="shop@10.0.0.9",group="",method="SayHello",provider="",service="demo.Greeter",side="consumer",version=""} 3
	// minidubbo_failures_total{application="shop",consumer="shop@10.0.0.9",group="",kind="business",method="SayHello",provider="",service="demo.Greeter",side="consumer",version=""} 1
}

// An application that already has a Prometheus registry adds the
// monitor's counts to it; its own /metrics then shows them beside its
// metrics (promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
func ExampleNewCollector() {
	m := monitor.New(monitor.WithIdentity("shop", "10.0.0.9"))
	greeter := protocol.Chain(protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{Value: "hello", RequestBytes: 12, ResponseBytes: 20}, nil
	}}, m.Filter(monitor.Consumer))
	_, _ = greeter.Invoke(context.Background(), &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"})

	reg := prometheus.NewRegistry()
	reg.MustRegister(prom.NewCollector(m))
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		total := 0.0
		for _, mt := range f.GetMetric() {
			total += mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetSummary().GetSampleCount())
		}
		fmt.Println(f.GetName(), f.GetType(), len(f.GetMetric()), "series, total", total)
	}
	// Output:
	// minidubbo_call_duration_seconds SUMMARY 1 series, total 1
	// minidubbo_calls_in_flight GAUGE 1 series, total 0
	// minidubbo_calls_total COUNTER 1 series, total 1
	// minidubbo_failures_total COUNTER 6 series, total 0
	// minidubbo_received_bytes_total COUNTER 1 series, total 20
	// minidubbo_sent_bytes_total COUNTER 1 series, total 12
}
