package loadbalance_test

import (
	"fmt"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
)

func ExampleTable() {
	t := loadbalance.Builtin()
	fmt.Println(t.Names())
	_, err := t.New("rr")
	fmt.Println(err)
	// Output:
	// [consistenthash leastactive p2c random roundrobin shortestresponse]
	// loadbalance: unknown "rr" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)
}

func ExampleRoundRobinBalancer() {
	var invokers []protocol.Invoker
	for _, p := range []struct {
		name, weight string
	}{{"A", "5"}, {"B", "1"}, {"C", "1"}} {
		u := protocol.NewURL("dubbo", p.name, 0, "demo.Greeter", map[string]string{protocol.KeyWeight: p.weight})
		invokers = append(invokers, protocol.InvokerFunc{U: u})
	}
	lb, _ := loadbalance.Builtin().New(loadbalance.RoundRobin)
	call := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello"}
	for range 7 {
		inv, _ := loadbalance.Select(lb, invokers, call)
		fmt.Print(inv.URL().Host, " ")
	}
	fmt.Println()
	// Output: A A B A C A A
}
