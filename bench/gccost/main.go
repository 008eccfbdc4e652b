//go:build linux

// Command gccost is a bare Go program with the allocation pattern of the
// bench's provider at 100 callers x 16 KiB, without any RPC: calls at a
// fixed rate from two goroutines, each with some plain CPU work, a 16 KiB
// argument copied into fresh memory (or, with -fresh=false, into one of a
// ring of reused arrays), kept alive while the next -inflight calls run,
// and copied once more as a reply's write would copy it. The difference
// in CPU per call between the two modes is what a fresh 16 KiB per call
// costs any Go program at this rate and heap on this machine, to set
// beside the provider's default-against-borrowed difference:
//
//	go run ./gccost -fresh=false; go run ./gccost
package main

import (
	"flag"
	"fmt"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// sink is where the reply's write copies to.
var sink [16 << 10]byte

// spin is plain CPU work standing for the rest of a call.
func spin(n int) uint64 {
	var h uint64 = 1469598103934665603
	for i := range n {
		h ^= uint64(i)
		h *= 1099511628211
	}
	return h
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	fresh := flag.Bool("fresh", true, "copy each argument into fresh memory (else into a reused array)")
	rate := flag.Int("rate", 18000, "calls per second, in batches every millisecond")
	work := flag.Int("work", 6000, "spin iterations per call (about 10 µs here)")
	inflight := flag.Int("inflight", 64, "arguments kept alive (the calls in flight)")
	size := flag.Int("size", 16384, "argument bytes")
	dur := flag.Duration("dur", 4*time.Second, "run time")
	flag.Parse()
	const workers = 2
	src := make([]byte, *size)
	ring := make([][]byte, *inflight)
	reuse := make([][]byte, *inflight)
	for i := range reuse {
		reuse[i] = make([]byte, *size)
	}
	var (
		mu    sync.Mutex
		pos   int
		calls uint64
		h     uint64
	)
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/scavenge/total:cpu-seconds"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(samples)
	g0, gc0, sc0 := samples[0].Value.Uint64(), samples[1].Value.Float64(), samples[2].Value.Float64()
	c0 := cpuTime()
	stop := time.Now().Add(*dur)
	perTick := max(*rate/1000/workers, 1)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			var n, hh uint64
			for time.Now().Before(stop) {
				<-t.C
				for range perTick {
					hh += spin(*work)
					mu.Lock()
					p := pos
					pos = (pos + 1) % len(ring)
					mu.Unlock()
					var b []byte
					if *fresh {
						b = make([]byte, len(src))
					} else {
						b = reuse[p]
					}
					copy(b, src)
					copy(sink[:], b)
					mu.Lock()
					ring[p] = b
					mu.Unlock()
					n++
				}
			}
			mu.Lock()
			calls += n
			h += hh
			mu.Unlock()
		})
	}
	wg.Wait()
	c1 := cpuTime()
	metrics.Read(samples)
	g1, gc1, sc1 := samples[0].Value.Uint64(), samples[1].Value.Float64(), samples[2].Value.Float64()
	cs := float64(calls)
	fmt.Printf("fresh=%v: %.0f calls/s, CPU %.2f µs/call, GCs/10k calls %.1f, GC CPU %.2f µs/call, scavenger %.2f µs/call, live heap %.2f MiB, goal %.2f MiB (%d)\n",
		*fresh, cs/dur.Seconds(), float64(c1-c0)/1e3/cs, float64(g1-g0)*1e4/cs, (gc1-gc0)*1e6/cs, (sc1-sc0)*1e6/cs,
		float64(samples[3].Value.Uint64())/(1<<20), float64(samples[4].Value.Uint64())/(1<<20), h%2)
}
