package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/server"
	"github.com/minidubbo/minidubbo/monitor/store"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// An operator runs the monitor server over a store: applications send it
// their reports (through the exported Collector; here one is handed to
// Collect directly), and people and Prometheus read them over HTTP.
// `minidubbo monitor -data DIR -http :8080` does the same, with the
// Collector exported on a dubbo port.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "monitor-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	srv, err := server.New(st, server.Options{})
	if err != nil {
		panic(err)
	}

	// An application ("shop") counts its calls: three, one of them failed.
	m := monitor.New(monitor.WithIdentity("shop", "10.0.0.9"))
	greeter := protocol.Chain(protocol.InvokerFunc{F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if inv.Args[0] == "" {
			return nil, service.Errorf(service.CodeInvalidArgument, "empty name")
		}
		return &protocol.Result{Value: "hello"}, nil
	}}, m.Filter(monitor.Consumer))
	for _, name := range []string{"ann", "bob", ""} {
		_, _ = greeter.Invoke(ctx, &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{name}})
	}
	// Its reporter sends the counts every minute; over the network Send is
	// the Collect of a referred monitor.CollectorClient. Close sends the
	// last interval's.
	rep, err := monitor.NewReporter(m, monitor.ReporterOptions{Send: srv.Collect})
	if err != nil {
		panic(err)
	}
	if err := rep.Close(ctx); err != nil {
		panic(err)
	}

	web := httptest.NewServer(srv.Handler()) // http.ListenAndServe(":8080", srv.Handler())
	defer web.Close()
	get := func(path string) *http.Response {
		resp, err := web.Client().Get(web.URL + path)
		if err != nil {
			panic(err)
		}
		return resp
	}

	// The report, as the dashboard and `minidubbo report` read it.
	resp := get("/api/report?since=1h&by=method")
	var sum store.Summary
	err = json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if err != nil {
		panic(err)
	}
	for _, r := range sum.Rows {
		fmt.Println(r.Side, r.Application, r.Service, r.Method, "calls", r.Calls, "failed", r.Failures, r.FailuresByKind)
	}

	// The same counts for Prometheus (here the calls, the failures that
	// are not 0, and the reports stored).
	resp = get("/metrics")
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "minidubbo_calls_total") ||
			strings.HasPrefix(line, "minidubbo_call_failures_total") && !strings.HasSuffix(line, " 0") ||
			strings.HasPrefix(line, `minidubbo_monitor_reports_total{outcome="stored"}`) {
			fmt.Println(line)
		}
	}
	// Output:
	// consumer shop demo.Greeter SayHello calls 3 failed 1 map[business:1]
	// minidubbo_call_failures_total{application="shop",consumer="shop@10.0.0.9",kind="business",method="SayHello",provider="",service="demo.Greeter",side="consumer"} 1
	// minidubbo_calls_total{application="shop",consumer="shop@10.0.0.9",method="SayHello",provider="",service="demo.Greeter",side="consumer"} 3
	// minidubbo_monitor_reports_total{outcome="stored"} 1
}
