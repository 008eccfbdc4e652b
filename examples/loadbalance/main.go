// Command loadbalance is the load-balancing lab: it starts real providers
// on loopback, some of them slowed by a per-call delay, drives every
// load-balancing algorithm with the same closed-loop load through a
// cluster invoker and a consumer stub, prints for each algorithm the share
// of calls each provider served, the p50 and p99 latency and the errors,
// and writes an SVG chart of the shares.
//
//	go run ./examples/loadbalance -providers 4 -slow 1 -delay 20ms -calls 4000 -svg loadbalance.svg
//
// Round robin and random give the slow provider its full share, so calls
// pile up on it; leastactive, shortestresponse and p2c route around it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
)

// Interface is the lab service's name.
const Interface = "lab.Worker"

// config is the lab's set-up.
type config struct {
	providers   int
	slow        int
	delay       time.Duration // per call, slow providers
	base        time.Duration // per call, the others
	calls       int           // per algorithm
	concurrency int
	algos       []string
	svg         string
}

func main() {
	var c config
	var algos string
	flag.IntVar(&c.providers, "providers", 4, "number of providers")
	flag.IntVar(&c.slow, "slow", 1, "how many of them are slow (the last ones)")
	flag.DurationVar(&c.delay, "delay", 20*time.Millisecond, "per-call delay of a slow provider")
	flag.DurationVar(&c.base, "base", time.Millisecond, "per-call delay of the other providers")
	flag.IntVar(&c.calls, "calls", 4000, "calls per algorithm")
	flag.IntVar(&c.concurrency, "concurrency", 16, "callers running at once")
	flag.StringVar(&algos, "algos", "random,roundrobin,leastactive,shortestresponse,p2c,consistenthash", "algorithms to compare, comma-separated")
	flag.StringVar(&c.svg, "svg", "loadbalance.svg", "file to write the chart to (empty: none)")
	flag.Parse()
	c.algos = strings.Split(algos, ",")
	// The chart is written to a file made next to -svg before the runs,
	// so that a path that cannot be written is said at once, not after
	// every algorithm ran, and renamed over -svg at the end: a failed run
	// leaves an earlier chart as it was.
	var tmp *os.File
	if c.svg != "" {
		f, err := os.CreateTemp(filepath.Dir(c.svg), ".loadbalance-*.svg")
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadbalance: -svg %s: %v (give -svg a file in a writable directory, or -svg \"\" for no chart)\n", c.svg, err)
			os.Exit(2)
		}
		tmp = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	reports, err := run(ctx, c, os.Stdout)
	stop()
	if err == nil && tmp != nil {
		_, err = tmp.WriteString(chart(c, reports))
		if err == nil {
			err = tmp.Chmod(0o644)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), c.svg)
		}
	}
	if err != nil {
		if tmp != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
		fmt.Fprintln(os.Stderr, "loadbalance:", err)
		os.Exit(1)
	}
	if tmp != nil {
		fmt.Printf("chart written to %s\n", c.svg)
	}
}

// Worker is the lab service: Work waits for the provider's delay and says
// who served the call. It keeps the peak number of calls it ran at once.
type Worker struct {
	name     string
	delay    time.Duration
	inflight atomic.Int64
	peak     atomic.Int64
}

// Work serves one call.
func (w *Worker) Work(ctx context.Context, key string) (string, error) {
	n := w.inflight.Add(1)
	defer w.inflight.Add(-1)
	for {
		p := w.peak.Load()
		if n <= p || w.peak.CompareAndSwap(p, n) {
			break
		}
	}
	t := time.NewTimer(w.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return w.name, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// client is the consumer stub.
type client struct {
	Work func(ctx context.Context, key string) (string, error)
}

// report is what one algorithm did.
type report struct {
	algo     string
	counts   map[string]int
	peak     map[string]int64 // most calls a provider ran at once
	errors   int
	p50, p99 time.Duration
	elapsed  time.Duration
}

type providerInfo struct {
	name  string
	delay time.Duration
}

func (c config) validate() error {
	switch {
	case c.providers < 1:
		return fmt.Errorf("-providers %d: need at least 1", c.providers)
	case c.slow < 0 || c.slow > c.providers:
		return fmt.Errorf("-slow %d: must be between 0 and -providers", c.slow)
	case c.calls < 1 || c.concurrency < 1:
		return fmt.Errorf("-calls and -concurrency must be positive")
	case c.delay < 0 || c.base < 0:
		return fmt.Errorf("delays must not be negative")
	}
	for _, a := range c.algos {
		// The table's own error names the nearest algorithm and the list.
		if _, err := loadbalance.Builtin().New(a); err != nil {
			return fmt.Errorf("-algos: %w", err)
		}
	}
	return nil
}

func (c config) provs() []providerInfo {
	out := make([]providerInfo, c.providers)
	for i := range out {
		out[i] = providerInfo{name: "p" + strconv.Itoa(i+1), delay: c.base}
		if i >= c.providers-c.slow {
			out[i].delay = c.delay
		}
	}
	return out
}

// run starts the providers, drives every algorithm and prints the tables.
func run(ctx context.Context, c config, w io.Writer) ([]report, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	provs := c.provs()
	var invs []protocol.Invoker
	var workers []*Worker
	consumer, err := dubbo.New(nil)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	for _, p := range provs {
		proto, err := dubbo.New(&dubbo.Options{MaxConcurrent: 10 * c.concurrency})
		if err != nil {
			return nil, err
		}
		defer proto.Close()
		u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, Interface, nil)
		wk := &Worker{name: p.name, delay: p.delay}
		workers = append(workers, wk)
		pinv, err := proxy.NewProvider(u, wk)
		if err != nil {
			return nil, err
		}
		exp, err := proto.Export(pinv)
		if err != nil {
			return nil, err
		}
		// Each call's bound is its context's 10 s (drive), not the
		// default 1 s timeout: a call to the slow provider that timed
		// out on a loaded machine was retried on another and moved the
		// counts the lab shows.
		cinv, err := consumer.Refer(exp.URL().With(protocol.KeyTimeout, "10000"))
		if err != nil {
			return nil, err
		}
		invs = append(invs, cinv)
	}
	dir := cluster.NewStatic(invs...)
	fmt.Fprintf(w, "%d providers on loopback:", len(provs))
	for _, p := range provs {
		fmt.Fprintf(w, " %s=%v", p.name, p.delay)
	}
	fmt.Fprintf(w, "; %d calls per algorithm, %d at a time\n", c.calls, c.concurrency)
	var reports []report
	for _, algo := range c.algos {
		r, err := drive(ctx, c, dir, workers, algo)
		if err != nil {
			return reports, err
		}
		reports = append(reports, r)
		printReport(w, provs, r)
	}
	return reports, nil
}

// drive sends c.calls calls through a cluster invoker using algo, from
// c.concurrency goroutines, each starting its next call when the last ends.
func drive(ctx context.Context, c config, dir *cluster.Static, workers []*Worker, algo string) (report, error) {
	ref := protocol.NewURL("consumer", "127.0.0.1", 0, Interface, nil)
	ci, err := cluster.New(dir, cluster.Options{LoadBalance: algo, Retries: cluster.DefaultRetries, URL: ref})
	if err != nil {
		return report{}, err
	}
	defer ci.Close()
	var stub client
	if err := proxy.Refer(&stub, ci); err != nil {
		return report{}, err
	}
	// warm the connections so that dialling is not measured
	for range len(dir.Snapshot().Invokers()) {
		if _, err := stub.Work(ctx, "warm"); err != nil {
			return report{}, fmt.Errorf("%s: warm-up call: %w", algo, err)
		}
	}
	for _, wk := range workers {
		wk.peak.Store(0)
	}
	lat := make([]time.Duration, c.calls)
	served := make([]string, c.calls)
	var next atomic.Int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= c.calls || ctx.Err() != nil {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				name, err := stub.Work(cctx, "user-"+strconv.Itoa(i))
				lat[i] = time.Since(t0)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				served[i] = name
			}
		})
	}
	wg.Wait()
	r := report{algo: algo, counts: map[string]int{}, peak: map[string]int64{}, errors: int(errs.Load()), elapsed: time.Since(start)}
	for _, wk := range workers {
		r.peak[wk.name] = wk.peak.Load()
	}
	for _, s := range served {
		if s != "" {
			r.counts[s]++
		}
	}
	slices.Sort(lat)
	r.p50 = lat[len(lat)*50/100]
	r.p99 = lat[min(len(lat)*99/100, len(lat)-1)]
	return r, ctx.Err()
}

func printReport(w io.Writer, provs []providerInfo, r report) {
	total := 0
	for _, n := range r.counts {
		total += n
	}
	fmt.Fprintf(w, "\n%s\n", r.algo)
	fmt.Fprintf(w, "  %-8s %6s %6s %6s %9s\n", "provider", "delay", "calls", "share", "peak busy")
	for _, p := range provs {
		n := r.counts[p.name]
		fmt.Fprintf(w, "  %-8s %6s %6d %5.1f%% %9d\n", p.name, dur(p.delay), n, 100*float64(n)/float64(max(total, 1)), r.peak[p.name])
	}
	fmt.Fprintf(w, "  p50 %s  p99 %s  errors %d  elapsed %s  (%.0f calls/s)\n",
		dur(r.p50), dur(r.p99), r.errors, dur(r.elapsed), float64(total)/r.elapsed.Seconds())
}
