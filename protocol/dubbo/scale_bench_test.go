package dubbo_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// BenchmarkManyConsumers is one provider (in a child process) serving
// 1,000 consumers, each with its own connection and one caller, all
// calling at once: ns/op is the inverse of the provider's throughput,
// calls/s says it directly. The consumers share this process's 2 cores
// with the provider's, so provider-cpu-µs/op, the provider process's CPU
// time per call (from /proc), says more of the provider than ns/op does.
//
// In a closed loop each call waits for about consumers / (calls/s), the
// other 999 calls' turn: 0.34 s at 2,900 calls/s, and its tail passed 1 s
// on the loaded machine (3-460 of 60,000 calls failed with the default 1 s
// timeout, no reply lost). So the calls' timeout is manyTimeout, and
// max-call-ms and calls-over-1s/op report the latency the default would
// have cut. Any call that fails (a lost reply still does, at manyTimeout)
// fails the benchmark.
func BenchmarkManyConsumers(b *testing.B) {
	const consumers = 1000
	port, _, pid := startBenchProviderProc(b)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "bench.Echo",
		map[string]string{protocol.KeyTimeout: strconv.Itoa(int(manyTimeout.Milliseconds()))})
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
	var failed, over1s, maxCall atomic.Int64
	var firstErr atomic.Value
	b.SetParallelism((consumers + runtimeProcs() - 1) / runtimeProcs())
	b.ReportAllocs()
	start := time.Now()
	provBefore := procCPUTime(pid)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		inv := invs[int(next.Add(1)-1)%consumers]
		for pb.Next() {
			var reply string
			t0 := time.Now()
			_, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply})
			d := int64(time.Since(t0))
			if d > int64(time.Second) {
				over1s.Add(1)
			}
			for m := maxCall.Load(); d > m && !maxCall.CompareAndSwap(m, d); m = maxCall.Load() {
			}
			if err != nil || len(reply) != len(payload) {
				if failed.Add(1) == 1 {
					firstErr.Store(fmt.Sprintf("%v (reply of %d bytes)", err, len(reply)))
				}
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	b.ReportMetric(float64(maxCall.Load())/float64(time.Millisecond), "max-call-ms")
	b.ReportMetric(float64(over1s.Load())/float64(b.N), "calls-over-1s/op")
	if provBefore > 0 {
		b.ReportMetric(float64((procCPUTime(pid)-provBefore).Microseconds())/float64(b.N), "provider-cpu-µs/op")
	}
	if n := failed.Load(); n > 0 {
		b.Errorf("%d of %d calls failed (timeout %v, slowest call %v); the first: %v",
			n, b.N, manyTimeout, time.Duration(maxCall.Load()), firstErr.Load())
	}
}

// manyTimeout is the calls' timeout in BenchmarkManyConsumers: ten times
// the default that the loaded machine's slowest queued calls passed.
const manyTimeout = 10 * time.Second
