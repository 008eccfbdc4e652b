package monitor_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
)

func ExampleMonitor() {
	m := monitor.New()
	next := protocol.InvokerFunc{F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if inv.Args[0] == "" {
			return nil, errors.New("empty name")
		}
		return &protocol.Result{Value: "hello, " + inv.Args[0].(string)}, nil
	}}
	// The filter goes into an invoker chain, on the consumer or provider side.
	inv := protocol.Chain(next, m.Filter(monitor.Consumer))

	for _, name := range []string{"ann", "bob", ""} {
		_, _ = inv.Invoke(context.Background(), &protocol.Invocation{
			Service: "demo.Greeter", Method: "SayHello", Args: []any{name},
		})
	}
	for _, s := range m.Snapshot() {
		fmt.Println(s.Side, s.Service, s.Method, "calls", s.Calls, "ok", s.Successes, "failed", s.Failures, "in flight", s.Concurrent)
	}
	// Output:
	// consumer demo.Greeter SayHello calls 3 ok 2 failed 1 in flight 0
}

// A Collector answers a report it will never accept with Refused; the
// reporter recognises the answer with IsRefused (also after it crossed the
// wire) and drops that report instead of sending it again.
func ExampleRefused() {
	collect := func(_ context.Context, r *monitor.Report) error {
		if len(r.Rows) > 1 {
			return monitor.Refused(fmt.Errorf("%d rows, more than 1", len(r.Rows)))
		}
		return nil
	}
	err := collect(context.Background(), &monitor.Report{Rows: make([]monitor.Row, 2)})
	fmt.Println(monitor.IsRefused(err), err)
	fmt.Println(monitor.IsRefused(errors.New("connection refused")))
	// Output:
	// true error (code 3, invalid argument): 2 rows, more than 1
	// false
}
