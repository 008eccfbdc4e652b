package dubbo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
)

// BenchmarkReply is a call through the protocol invoker whose reply is
// decoded into a []byte or a string, at 100 and 500 callers, for 581 bytes
// and 16 KiB, the provider in a child process. Besides ns/op it reports the
// consumer process's CPU time per call (getrusage), cpu-µs/op, which a
// loaded machine inflates less than the elapsed time.
func BenchmarkReply(b *testing.B) {
	port, _ := startBenchProvider(b)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "bench.Echo", nil)
	for _, size := range []int{581, 16 << 10} {
		arg := strings.Repeat("r", size)
		for _, kind := range []string{"bytes", "string"} {
			for _, callers := range []int{100, 500} {
				b.Run(kind+"/"+itoa(size)+"/callers="+itoa(callers), func(b *testing.B) {
					cli := newProtocol(b, nil)
					inv := refer(b, cli, u)
					ctx := context.Background()
					call := func() {
						var n int
						var err error
						if kind == "bytes" {
							var reply []byte
							_, err = inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{arg}, Reply: &reply})
							n = len(reply)
						} else {
							var reply string
							_, err = inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{arg}, Reply: &reply})
							n = len(reply)
						}
						if err != nil || n != size {
							b.Errorf("call: %v (reply %d bytes)", err, n)
						}
					}
					call()
					before := cpuTime()
					run(b, callers, call)
					b.StopTimer()
					b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
				})
			}
		}
	}
}

// BenchmarkBytesEcho is a call with a []byte argument and reply through
// the protocol invoker, to a provider method that takes and returns []byte
// (as the bench/ module's), 100 callers, the provider in a child process.
// It reports the CPU time per call of the consumer (cpu-µs/op) and of the
// provider (provider-cpu-µs/op, from /proc in 10 ms ticks).
func BenchmarkBytesEcho(b *testing.B) {
	port, _, pid := startBenchProviderProc(b)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "bench.BytesEcho", nil)
	for _, size := range []int{581, 16 << 10} {
		arg := []byte(strings.Repeat("r", size))
		b.Run(itoa(size), func(b *testing.B) {
			cli := newProtocol(b, nil)
			inv := refer(b, cli, u)
			ctx := context.Background()
			call := func() {
				var reply []byte
				_, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.BytesEcho", Method: "Echo", Args: []any{arg}, Reply: &reply})
				if err != nil || len(reply) != size {
					b.Errorf("call: %v (reply %d bytes)", err, len(reply))
				}
			}
			call()
			before, provBefore := cpuTime(), procCPUTime(pid)
			run(b, 100, call)
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64((procCPUTime(pid)-provBefore).Microseconds())/float64(b.N), "provider-cpu-µs/op")
		})
	}
}
