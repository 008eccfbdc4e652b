package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

type clientArgs struct {
	system, addr, info string
	serverPID          int
	serverStats        string // the server's stats address, or "" or "-"
	callers, size      int
	conns              int
	warmup, duration   time.Duration
	maxCalls           int64
}

// result is what one load run prints, as JSON, for the parent.
type result struct {
	System     string  `json:"system"`
	Callers    int     `json:"callers"`
	Size       int     `json:"size"`
	Calls      int64   `json:"calls"`  // recorded successful calls
	Errors     int64   `json:"errors"` // failed calls, warm-up included
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	QPS        float64 `json:"qps"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	ClientCPU  float64 `json:"client_cpu_us_per_call"`
	ServerCPU  float64 `json:"server_cpu_us_per_call"`
	// OtherCPU is the CPU time the rest of the machine used during the
	// recorded window (all CPUs' busy time less the client's and the
	// server's, interrupts left out), in CPUs: other processes' load and
	// time stolen by the hypervisor. It shows how quiet the machine was.
	OtherCPU float64 `json:"other_cpus"`
	// ClientGo and ServerGo are each process's Go runtime figures per
	// call over the recorded window (ServerGo only when the server
	// answers on a stats address).
	ClientGo sideStats `json:"client_go"`
	ServerGo sideStats `json:"server_go"`
	HaveGo   bool      `json:"have_server_go"`
	// Binary is the load client's executable's name: bench-SYSTEM when
	// it links only its own system, bench when it links every one.
	Binary string `json:"binary"`
}

// Phases of a run.
const (
	warming = iota
	recording
	stopped
)

// latencyBatch is how many latencies a caller gathers before adding them
// to the run's histogram.
const latencyBatch = 1024

// runClient makes one closed-loop run: a fixed number of callers, each
// calling again as soon as its reply arrives, over one caller (connection
// pool) for the whole process. Every latency of the recorded window goes
// into one histogram.
func runClient(a clientArgs) error {
	s, err := lookup(a.system)
	if err != nil {
		return err
	}
	if a.callers < 1 || a.size < 1 || a.conns < 1 || a.duration <= 0 {
		return fmt.Errorf("callers %d, size %d, conns %d and duration %v must be positive", a.callers, a.size, a.conns, a.duration)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.warmup+a.duration+30*time.Second)
	defer cancel()
	c, err := s.dial(ctx, a.addr, a.info, a.conns)
	if err != nil {
		return fmt.Errorf("dial %s %s: %w", a.system, a.addr, err)
	}
	defer c.Close()

	var phase atomic.Int32
	var total atomic.Int64 // calls started, for the max-calls bound
	var errCount atomic.Int64
	var firstErr atomic.Value
	// Every recorded latency goes into one histogram. A caller gathers
	// its latencies in a small buffer and adds them to the histogram
	// under hmu when the buffer is full (one lock per latencyBatch
	// calls), so the load client's heap stays a few MiB at any number
	// of callers: it allocates and collects garbage as an application
	// of modest heap would, for every system alike.
	h := hdrhistogram.New(1, int64(time.Minute), 3)
	var hmu sync.Mutex
	var n int64
	record := func(ds []int64) {
		hmu.Lock()
		for _, d := range ds {
			_ = h.RecordValue(d)
		}
		n += int64(len(ds))
		hmu.Unlock()
	}
	var wg sync.WaitGroup
	batches := make([][]int64, a.callers)
	for i := range a.callers {
		req := bytes.Repeat([]byte{byte('a' + i%26)}, a.size)
		// The batch lives on the heap (held by batches): on a caller's
		// stack its 8 KiB would be scanned by every collection of the
		// load client while the caller waits for a reply, 800 KiB at
		// 100 callers, swelling every system's client GC figures with
		// the harness's own stacks.
		batches[i] = make([]int64, 0, latencyBatch)
		wg.Go(func() {
			own := batches[i]
			defer func() { record(own) }()
			for ctx.Err() == nil && total.Add(1) <= a.maxCalls {
				p := phase.Load()
				if p == stopped {
					return
				}
				t0 := time.Now()
				resp, err := c.Call(ctx, req)
				d := time.Since(t0)
				if err == nil && !bytes.Equal(resp, req) {
					err = fmt.Errorf("reply of %d bytes differs from the request of %d", len(resp), len(req))
				}
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if p == recording {
					own = append(own, int64(d))
					if len(own) == cap(own) {
						record(own)
						own = own[:0]
					}
				}
			}
		})
	}
	time.Sleep(a.warmup)
	sgo0, serr := fetchStats(a.serverStats)
	cgo0 := readGoStats()
	cpu0, srv0, all0 := selfCPU(), procCPU(a.serverPID), machineCPU()
	t0 := time.Now()
	phase.Store(recording)
	time.Sleep(a.duration)
	phase.Store(stopped)
	elapsed := time.Since(t0)
	cpu1, srv1, all1 := selfCPU(), procCPU(a.serverPID), machineCPU()
	cgo1 := readGoStats()
	sgo1, serr1 := fetchStats(a.serverStats)
	wg.Wait()
	if serr == nil {
		serr = serr1
	}
	if serr != nil {
		return serr
	}

	res := result{
		System: a.system, Callers: a.callers, Size: a.size,
		Calls: n, Errors: errCount.Load(), Seconds: elapsed.Seconds(),
		QPS:  float64(n) / elapsed.Seconds(),
		P50:  float64(h.ValueAtQuantile(50)) / 1e3,
		P99:  float64(h.ValueAtQuantile(99)) / 1e3,
		P999: float64(h.ValueAtQuantile(99.9)) / 1e3,
	}
	if exe, err := os.Executable(); err == nil {
		res.Binary = filepath.Base(exe)
	}
	res.ClientGo, _ = perCall(cgo0, cgo1, n)
	res.ServerGo, res.HaveGo = perCall(sgo0, sgo1, n)
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}
	if all0 >= 0 && all1 >= 0 && srv0 >= 0 && srv1 >= 0 {
		other := (all1 - all0) - (cpu1 - cpu0) - (srv1 - srv0)
		res.OtherCPU = max(other.Seconds()/elapsed.Seconds(), 0)
	}
	if n > 0 {
		res.ClientCPU = float64((cpu1 - cpu0).Microseconds()) / float64(n)
		if srv0 >= 0 && srv1 >= 0 {
			res.ServerCPU = float64((srv1 - srv0).Microseconds()) / float64(n)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU is the busy time of all CPUs (user, nice, system and steal
// time from /proc/stat, in ticks of 10 ms), or -1. Interrupt time is left
// out: on loopback most of it is the run's own network processing, which
// the kernel charges to no process.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return -1
		}
		busy += v
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(busy) * tick
}

// procCPU is process pid's user and system CPU time from /proc (in clock
// ticks of 10 ms), or -1.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name may hold spaces; fields count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick
}
