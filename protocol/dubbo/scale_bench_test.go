package dubbo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// BenchmarkManyConsumers is one provider (in a child process) serving
// 1,000 consumers, each with its own connection and one caller, all
// calling at once: ns/op is the inverse of the provider's throughput,
// calls/s says it directly.
func BenchmarkManyConsumers(b *testing.B) {
	const consumers = 1000
	port, _ := startBenchProvider(b)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "bench.Echo", nil)
	invs := make([]protocol.Invoker, consumers)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range invs {
		invs[i] = refer(b, newProtocol(b, nil), u) // a protocol each: a connection each
		var reply string
		if _, err := invs[i].Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var failed atomic.Int64
	b.SetParallelism((consumers + runtimeProcs() - 1) / runtimeProcs())
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		inv := invs[int(next.Add(1)-1)%consumers]
		for pb.Next() {
			var reply string
			_, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply})
			if err != nil || len(reply) != len(payload) {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	if n := failed.Load(); n > 0 {
		b.Errorf("%d of %d calls failed", n, b.N)
	}
}
