package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// The monitor server adds every report it receives to a store; an
// operator reads the same data directory later, read-only, as
// `minidubbo report -data DIR -by provider` does.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// An application's counts: a consumer sent 3 attempts to one provider
	// and 2 to another, which timed out once.
	m := monitor.New(monitor.WithIdentity("shop", "10.0.0.9"))
	inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"}
	answer := func(err error) protocol.Invoker {
		return protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
			return &protocol.Result{}, err
		}}
	}
	for range 3 {
		_, _ = m.AttemptFilter("10.0.0.1:20880").Invoke(ctx, inv, answer(nil))
	}
	_, _ = m.AttemptFilter("10.0.0.2:20880").Invoke(ctx, inv, answer(nil))
	_, _ = m.AttemptFilter("10.0.0.2:20880").Invoke(ctx, inv, answer(&status.TimeoutError{}))
	r := m.TakeReport()
	r.Seq = 1 // a monitor.Reporter numbers its reports

	// The monitor server's side: each report is stored once.
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		panic(err)
	}
	for range 2 { // the second time, a sender re-sending after a lost answer
		outcome, err := st.Add(ctx, r)
		if err != nil {
			panic(err)
		}
		fmt.Println("add:", outcome)
	}
	if err := st.Close(); err != nil {
		panic(err)
	}

	// The operator's side: the last hour, one row per provider.
	ro, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		panic(err)
	}
	defer ro.Close()
	sum, err := ro.Query(ctx, store.Query{By: store.ByProvider})
	if err != nil {
		panic(err)
	}
	for _, row := range sum.Rows {
		fmt.Println(row.Side, row.Service, row.Provider, "calls", row.Calls, "failed", row.Failures, row.FailuresByKind)
	}
	// Output:
	// add: stored
	// add: duplicate
	// consumer demo.Greeter 10.0.0.1:20880 calls 3 failed 0 map[]
	// consumer demo.Greeter 10.0.0.2:20880 calls 2 failed 1 map[timeout:1]
}
