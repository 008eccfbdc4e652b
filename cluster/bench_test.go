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
