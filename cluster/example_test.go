package cluster_test

import (
	"context"
	"fmt"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

func Example() {
	calls := map[string]int{}
	provider := func(host string, err error) protocol.Invoker {
		return protocol.InvokerFunc{
			U: protocol.NewURL("dubbo", host, 20880, "demo.Greeter", nil),
			F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
				calls[host]++
				return &protocol.Result{Value: "hello from " + host}, err
			},
		}
	}
	dir := cluster.NewStatic(
		provider("10.0.0.1", status.ErrConnLost), // down: failover retries elsewhere
		provider("10.0.0.2", nil),
	)
	o := cluster.DefaultOptions() // failover, 2 retries
	o.LoadBalance = loadbalance.RoundRobin
	c, err := cluster.New(dir, o)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	res, err := c.Invoke(context.Background(), &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"})
	fmt.Println(res.Value, err, calls)

	_, err = cluster.New(dir, cluster.Options{Strategy: "failsome"})
	fmt.Println(err)
	// Output:
	// hello from 10.0.0.2 <nil> map[10.0.0.1:1 10.0.0.2:1]
	// cluster: unknown strategy "failsome"; did you mean "failsafe"? (known: broadcast, failback, failfast, failover, failsafe, forking)
}
