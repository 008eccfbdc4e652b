// Command bench compares minidubbo with other Go RPC frameworks and a raw
// TCP baseline on loopback: each server runs in its own process (-serve),
// each load run in another (-client), and the parent prints one table of
// medians over interleaved repetitions.
//
// Built as is, the binary links every system. Built with the tags
// benchone and bench_SYSTEM (raw, netrpc, rpcx, kitex, grpc, minidubbo,
// minidubbo_borrow for minidubbo-borrow) it links that system alone; the parent runs each system's server and load
// clients as bench-SYSTEM from its own directory (-bin-dir) when that
// exists, so no process carries another framework's packages, init-time
// heap and globals. `make bench-peers` builds them all:
//
//	go build -o /tmp/b/bench . && go build -tags benchone,bench_raw -o /tmp/b/bench-raw . && ...
//	/tmp/b/bench -reps 3 -duration 2s
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var (
		serve    = flag.String("serve", "", "run the server of this system and print its address (internal)")
		client   = flag.String("client", "", "run one load run against this system (internal)")
		addr     = flag.String("addr", "", "server address, with -client")
		info     = flag.String("info", "", "server information (minidubbo's provider URL), with -client")
		pid      = flag.Int("server-pid", 0, "server process id, for its CPU time, with -client")
		sstats   = flag.String("server-stats", "", "server's stats address (its READY line's last field), with -client")
		binDir   = flag.String("bin-dir", "", "directory of the bench-SYSTEM binaries, each linking only its own system (default: this binary's directory)")
		oneBin   = flag.Bool("one-binary", false, "run every server and load client as this binary, which links every system")
		callers  = flag.Int("callers", 1, "concurrent callers, with -client")
		size     = flag.Int("size", 581, "payload bytes, with -client")
		conns    = flag.Int("conns", 4, "connections per client")
		warmup   = flag.Duration("warmup", 500*time.Millisecond, "unrecorded time before each run")
		duration = flag.Duration("duration", 2*time.Second, "recorded time of each run")
		reps     = flag.Int("reps", 3, "interleaved repetitions of every row")
		systems  = flag.String("systems", strings.Join(systemNames(), ","), "systems to compare, in column order; NAME@all runs NAME by this binary, which links every system, next to NAME by its own binary")
		rows     = flag.String("rows", "1x581,16x581,100x581,500x581,100x16384", "rows as CALLERSxBYTES")
		maxCalls = flag.Int64("max-calls", 50_000_000, "upper bound of calls in one run")
		prof     profiles
	)
	flag.StringVar(&prof.cpu, "cpuprofile", "", "with -serve or -client: write a CPU profile to this file")
	flag.StringVar(&prof.allocs, "memprofile", "", "with -serve or -client: write an allocation profile to this file")
	flag.StringVar(&prof.block, "blockprofile", "", "with -serve or -client: write a blocking profile to this file")
	flag.StringVar(&prof.mutex, "mutexprofile", "", "with -serve or -client: write a mutex contention profile to this file")
	flag.Parse()
	var err error
	if *serve != "" || *client != "" {
		if err := prof.start(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer func() {
			if err := prof.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
			}
		}()
	}
	switch {
	case *serve != "":
		err = runServer(*serve)
	case *client != "":
		err = runClient(clientArgs{
			system: *client, addr: *addr, info: *info, serverPID: *pid, serverStats: *sstats,
			callers: *callers, size: *size, conns: *conns,
			warmup: *warmup, duration: *duration, maxCalls: *maxCalls,
		})
	default:
		err = runAll(*systems, *rows, *reps, *conns, *warmup, *duration, *binDir, *oneBin)
	}
	if err != nil {
		prof.stop()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
