package filter_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/status"
)

// Executes bounds the calls of a service running at once on a provider:
// with a bound of 1, a second call while the first runs is answered
// "server busy", which a consumer's failover retries on another
// provider. config puts it in front of a service with
// services.<id>.executes; a bound of 0 or less is none.
func ExampleNewExecutes() {
	running, release := make(chan struct{}), make(chan struct{})
	method := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		running <- struct{}{}
		<-release
		return &protocol.Result{Value: "done"}, nil
	}}
	inv := protocol.Chain(method, filter.NewExecutes(1))
	call := func() (*protocol.Result, error) {
		return inv.Invoke(context.Background(), &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"})
	}

	first := make(chan any, 1)
	go func() {
		res, err := call()
		if err != nil {
			first <- err
			return
		}
		first <- res.Value
	}()
	<-running // the first call holds the one place
	_, err := call()
	fmt.Println(errors.Is(err, status.ErrServerBusy), err)
	close(release)
	fmt.Println(<-first)

	unbounded := protocol.Chain(method, filter.NewExecutes(0))
	go func() { <-running }()
	res, err := unbounded.Invoke(context.Background(), &protocol.Invocation{Method: "SayHello"})
	fmt.Println(res.Value, err)
	// Output:
	// true server busy: demo.Greeter.SayHello: the executes limit (1 at once) is reached
	// done
	// done <nil>
}
