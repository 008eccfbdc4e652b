package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"runtime/metrics"
	"time"
)

// goStats is what the Go runtime says of its own process: garbage
// collections, the CPU time the runtime estimates it spent collecting, and
// heap allocations. A load client reads its own at the edges of the
// recorded window and asks the server for the server's (serveStats), so
// both sides' figures per call cover the same window.
type goStats struct {
	GCs        uint64  `json:"gcs"`
	GCSeconds  float64 `json:"gc_cpu_seconds"`
	AllocBytes uint64  `json:"alloc_bytes"`
	AllocObjs  uint64  `json:"alloc_objects"`
	LiveHeap   uint64  `json:"live_heap_bytes"`
	HeapGoal   uint64  `json:"heap_goal_bytes"`
	Goroutines uint64  `json:"goroutines"`
	ScanStack  uint64  `json:"scan_stack_bytes"` // scanned by the last collection
	ScanHeap   uint64  `json:"scan_heap_bytes"`
	// ScavengeSeconds is the runtime's estimate of the CPU time it spent
	// returning free heap memory to the OS (madvise), which the next
	// allocations fault back in; Released is the heap memory returned
	// and not taken back (at the reading).
	ScavengeSeconds float64 `json:"scavenge_cpu_seconds"`
	Released        uint64  `json:"heap_released_bytes"`
	// StopCounts are the counts of /sched/pauses/stopping/gc:seconds
	// (time to stop the world for the GC) by bucket, StopBounds the
	// buckets' bounds in seconds.
	StopCounts  []uint64  `json:"stop_counts,omitempty"`
	StopBounds  []float64 `json:"stop_bounds,omitempty"`
	Initialized bool      `json:"ok"`
}

var goStatNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
	"/sched/goroutines:goroutines",
	"/gc/scan/stack:bytes",
	"/gc/scan/heap:bytes",
	"/sched/pauses/stopping/gc:seconds",
	"/cpu/classes/scavenge/total:cpu-seconds",
	"/memory/classes/heap/released:bytes",
}

func readGoStats() goStats {
	s := make([]metrics.Sample, len(goStatNames))
	for i, n := range goStatNames {
		s[i].Name = n
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s[i].Value.Float64()
	}
	g := goStats{GCs: u(0), GCSeconds: f(1), AllocBytes: u(2), AllocObjs: u(3), LiveHeap: u(4), HeapGoal: u(5),
		Goroutines: u(6), ScanStack: u(7), ScanHeap: u(8), ScavengeSeconds: f(10), Released: u(11), Initialized: true}
	if s[9].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[9].Value.Float64Histogram()
		g.StopCounts = h.Counts
		for _, b := range h.Buckets { // JSON has no infinities
			g.StopBounds = append(g.StopBounds, max(min(b, math.MaxFloat64), -math.MaxFloat64))
		}
	}
	return g
}

// sideStats is one process's Go runtime figures over the recorded window,
// per recorded call.
type sideStats struct {
	GCsPer10k   float64 `json:"gcs_per_10k_calls"`
	GCCPU       float64 `json:"gc_cpu_us_per_call"`
	AllocBytes  float64 `json:"alloc_bytes_per_call"`
	AllocObjs   float64 `json:"allocs_per_call"`
	LiveHeapMiB float64 `json:"live_heap_mib"` // at the window's end
	// Goroutines at the window's end, and the bytes of goroutine stacks
	// and of heap the last collection scanned: a collection scans every
	// goroutine's stack.
	Goroutines   uint64  `json:"goroutines"`
	ScanStackKiB float64 `json:"scan_stack_kib"`
	ScanHeapKiB  float64 `json:"scan_heap_kib"`
	// MaxStopMs is the longest time the runtime took to stop the world
	// for a collection in the window (upper bound of its histogram
	// bucket), StopsOver1ms how many took over a millisecond.
	MaxStopMs    float64 `json:"max_gc_stop_ms"`
	StopsOver1ms uint64  `json:"gc_stops_over_1ms"`
	// ScavengeCPU is the runtime's estimate of its scavenger's CPU time
	// per call (included in no GC figure above).
	ScavengeCPU float64 `json:"scavenge_cpu_us_per_call"`
}

// perCall turns two readings of one process into figures per call; ok is
// false when either reading is missing.
func perCall(a, b goStats, calls int64) (sideStats, bool) {
	if !a.Initialized || !b.Initialized || calls <= 0 || b.GCs < a.GCs {
		return sideStats{}, false
	}
	n := float64(calls)
	var maxStop float64
	var over uint64
	if len(a.StopCounts) == len(b.StopCounts) && len(b.StopBounds) == len(b.StopCounts)+1 {
		for i := range b.StopCounts {
			d := b.StopCounts[i] - a.StopCounts[i]
			if d == 0 {
				continue
			}
			hi := b.StopBounds[i+1]
			if hi == math.MaxFloat64 {
				hi = b.StopBounds[i]
			}
			maxStop = max(maxStop, hi*1e3)
			if b.StopBounds[i] >= 1e-3 {
				over += d
			}
		}
	}
	return sideStats{
		GCsPer10k:    float64(b.GCs-a.GCs) / n * 1e4,
		GCCPU:        (b.GCSeconds - a.GCSeconds) * 1e6 / n,
		AllocBytes:   float64(b.AllocBytes-a.AllocBytes) / n,
		AllocObjs:    float64(b.AllocObjs-a.AllocObjs) / n,
		LiveHeapMiB:  float64(b.LiveHeap) / (1 << 20),
		Goroutines:   b.Goroutines,
		ScanStackKiB: float64(b.ScanStack) / 1024,
		ScanHeapKiB:  float64(b.ScanHeap) / 1024,
		MaxStopMs:    maxStop,
		StopsOver1ms: over,
		ScavengeCPU:  (b.ScavengeSeconds - a.ScavengeSeconds) * 1e6 / n,
	}, true
}

// serveStats answers every connection to ln with one JSON line of this
// process's goStats; the server's load clients read it at the edges of
// their recorded windows.
func serveStats(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		_ = json.NewEncoder(nc).Encode(readGoStats())
		nc.Close()
	}
}

// fetchStats reads a server's goStats from its stats address; a zero
// goStats (not Initialized) when addr is empty or "-".
func fetchStats(addr string) (goStats, error) {
	if addr == "" || addr == "-" {
		return goStats{}, nil
	}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return goStats{}, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	var s goStats
	line, err := bufio.NewReader(nc).ReadBytes('\n')
	if err != nil {
		return goStats{}, fmt.Errorf("server stats from %s: %w", addr, err)
	}
	if err := json.Unmarshal(line, &s); err != nil {
		return goStats{}, fmt.Errorf("server stats from %s: %w", addr, err)
	}
	return s, nil
}
