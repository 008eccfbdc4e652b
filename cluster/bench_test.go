package cluster

import (
	"context"
	"strconv"
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
)

// BenchmarkInvoke measures the cluster's own cost per call (list, route,
// availability, select, stats) over fake providers.
func BenchmarkInvoke(b *testing.B) {
	for _, lb := range []string{"random", "roundrobin", "leastactive"} {
		for _, n := range []int{3, 100} {
			b.Run(lb+"/"+strconv.Itoa(n), func(b *testing.B) {
				fs := fakes(n)
				c, err := New(static(fs), Options{LoadBalance: lb, Routers: []Router{NewTagRouter()}})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				inv := &protocol.Invocation{Service: "demo.Greeter", Method: "m"}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Invoke(ctx, inv); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// pickSetup builds a cluster invoker with a tag router over n fake
// providers, every third one tagged "gray", and three calls: untagged,
// tagged, and a failover retry that tried one provider already.
func pickSetup(tb testing.TB, algo string, n int) (c *Invoker, untagged, tagged *protocol.Invocation, tried Tried) {
	fs := fakes(n)
	invs := make([]protocol.Invoker, n)
	for i, f := range fs {
		if i%3 == 0 {
			f.u = f.u.With(protocol.KeyTag, "gray")
		}
		f.u = f.u.With(protocol.KeyWeight, strconv.Itoa(50+50*(i%3)))
		invs[i] = f
	}
	c, err := New(NewStatic(invs...), Options{LoadBalance: algo, Routers: []Router{NewTagRouter()}})
	if err != nil {
		tb.Fatal(err)
	}
	untagged = &protocol.Invocation{Service: "demo.Greeter", Method: "m", Args: []any{"user-42"}}
	tagged = &protocol.Invocation{Service: "demo.Greeter", Method: "m", Args: []any{"user-42"},
		Attachments: map[string]string{protocol.KeyTag: "gray"}}
	tried.Add(invs[1])
	return c, untagged, tagged, tried
}

// BenchmarkPick measures one pick per algorithm for 3, 100 and 1000
// providers, alternating an untagged call, a tagged call and a failover
// retry (which must avoid the provider it tried), as one op of three picks.
func BenchmarkPick(b *testing.B) {
	for _, algo := range []string{"random", "roundrobin", "leastactive", "shortestresponse", "p2c", "consistenthash"} {
		for _, n := range []int{3, 100, 1000} {
			b.Run(algo+"/"+strconv.Itoa(n), func(b *testing.B) {
				c, untagged, tagged, tried := pickSetup(b, algo, n)
				defer c.Close()
				pick3 := func() {
					if _, err := c.Pick(untagged, Tried{}); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Pick(tagged, Tried{}); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Pick(untagged, tried); err != nil {
						b.Fatal(err)
					}
				}
				pick3() // derive the subsets and pickers outside the loop
				b.ReportAllocs()
				for b.Loop() {
					pick3()
				}
			})
		}
	}
}
