// Command consumer calls the hello example's Greeter through ZooKeeper with
// a chosen load balancer and fault-tolerance strategy, and prints a summary:
// calls, errors by kind, calls per provider and latency percentiles. With
// -json it prints exactly one JSON object on stdout. It exits with status 0
// only when no call failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/examples/hello/greeter"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// Summary is what the consumer prints.
type Summary struct {
	Calls        int64            `json:"calls"`
	OK           int64            `json:"ok"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	ByProvider   map[string]int64 `json:"by_provider"`
	P50          float64          `json:"p50_ms"`
	P99          float64          `json:"p99_ms"`
}

// maxSamples bounds the latencies kept for percentiles.
const maxSamples = 1 << 20

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run() (int, error) {
	reg := flag.String("registry", "zookeeper://127.0.0.1:2181", "registry address")
	lb := flag.String("loadbalance", loadbalance.Default, "load balancer: "+strings.Join(loadbalance.Builtin().Names(), ", "))
	cl := flag.String("cluster", cluster.DefaultStrategy, "fault tolerance: "+strings.Join(cluster.Builtin().Names(), ", "))
	retries := flag.Int("retries", cluster.DefaultRetries, "failover retries")
	calls := flag.Int64("calls", 0, "number of calls (default 1000 when -duration is not set)")
	duration := flag.Duration("duration", 0, "call for this long instead of -calls")
	concurrency := flag.Int("concurrency", 4, "concurrent callers")
	timeout := flag.Duration("timeout", time.Second, "timeout per call")
	asJSON := flag.Bool("json", false, "print one JSON object")
	verbose := flag.Bool("v", false, "log registry and connection events to stderr")
	reportInterval := flag.Duration("report-interval", 0, "send call counts to the monitor service, found in the registry, this often (at least 1s; 0: do not report)")
	monitorAddr := flag.String("monitor", "", "report to the monitor service at this host:port instead of finding it in the registry (with -report-interval; default 60s)")
	metrics := flag.String("metrics", "", "serve this process's call counts to Prometheus at http://HOST:PORT/metrics")
	flag.Parse()
	if *calls < 0 || *duration < 0 || *concurrency < 1 {
		return 2, errors.New("-calls and -duration must not be negative, -concurrency must be at least 1")
	}
	if *calls == 0 && *duration == 0 {
		*calls = 1000
	}

	// Warnings and errors go to stderr (config's default); -v adds the
	// registry, session and provider-list events.
	logging := config.LoggingConfig{}
	if *verbose {
		logging.Level = "info"
	}
	r := *retries
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "hello-consumer"},
		Registries:  map[string]config.RegistryConfig{"default": {Address: *reg}},
		Monitor:     config.MonitorConfig{Interval: *reportInterval, Address: *monitorAddr, Metrics: *metrics},
		References: map[string]config.ReferenceConfig{"greeter": {
			Interface: greeter.Interface, LoadBalance: *lb, Cluster: *cl, Retries: &r, Timeout: *timeout,
			Check: true, // no provider (and a registry that cannot be reached): say so and exit 2
		}},
		Logging: logging,
	})
	if err != nil {
		return 2, greeter.FlagHint(err, map[string]string{
			"registries.default.address":     "-registry",
			"references.greeter.loadbalance": "-loadbalance",
			"references.greeter.cluster":     "-cluster",
			"references.greeter.retries":     "-retries",
			"references.greeter.timeout":     "-timeout",
			"monitor.interval":               "-report-interval",
			"monitor.address":                "-monitor",
			"monitor.metrics":                "-metrics",
		}, "")
	}
	defer app.Shutdown(context.Background())
	ctx := context.Background()
	var g greeter.Client
	if err := app.Refer(ctx, "greeter", &g); err != nil {
		return 2, greeter.RegistryHint(err, *reg)
	}

	var (
		seq      atomic.Int64
		mu       sync.Mutex
		byProv   = map[string]int64{}
		byKind   = map[string]int64{}
		firstErr = map[string]error{} // the first error of each kind, printed with the summary
		samples  []time.Duration
		okCount  atomic.Int64
		errCount atomic.Int64
		wg       sync.WaitGroup
	)
	deadline := time.Time{}
	if *duration > 0 {
		deadline = time.Now().Add(*duration)
	}
	for range *concurrency {
		wg.Go(func() {
			for {
				n := seq.Add(1)
				if *calls > 0 && n > *calls {
					return
				}
				if !deadline.IsZero() && time.Now().After(deadline) {
					return
				}
				start := time.Now()
				reply, err := g.SayHello(ctx, fmt.Sprintf("call %d", n))
				el := time.Since(start)
				mu.Lock()
				if len(samples) < maxSamples {
					samples = append(samples, el)
				}
				if err != nil {
					k := kindOf(err)
					byKind[k]++
					if firstErr[k] == nil {
						firstErr[k] = err
					}
				} else if reply != nil {
					byProv[reply.Addr]++
				}
				mu.Unlock()
				if err != nil {
					errCount.Add(1)
				} else {
					okCount.Add(1)
				}
			}
		})
	}
	wg.Wait()
	s := Summary{
		OK: okCount.Load(), Errors: errCount.Load(),
		ErrorsByKind: byKind, ByProvider: byProv,
		P50: percentile(samples, 0.50), P99: percentile(samples, 0.99),
	}
	s.Calls = s.OK + s.Errors
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
			return 2, err
		}
	} else {
		printSummary(s, *lb, *cl, firstErr, *timeout)
		fmt.Println("consumer-side monitor:")
		for _, st := range app.Monitor().Snapshot() {
			fmt.Println("  " + st.String())
		}
	}
	if s.Errors != 0 {
		return 1, nil
	}
	return 0, nil
}

// printSummary prints s, and under each kind of error the first error of
// that kind, with what to try when the kind has a usual cure: the counts
// alone do not say why calls failed.
func printSummary(s Summary, lb, cl string, firstErr map[string]error, timeout time.Duration) {
	advice := map[string]string{
		"timeout": fmt.Sprintf("each call had -timeout %v: give a longer one, or find the slow provider "+
			"(its avg in the consumer-side monitor lines)", timeout),
		"connection":  "a provider went away or cannot be reached: minidubbo ls lists the registered ones",
		"server_busy": "the provider refused calls beyond its limits: give a lower -concurrency",
	}
	fmt.Printf("%d calls (%s, %s): %d ok, %d errors; p50 %.2f ms, p99 %.2f ms\n", s.Calls, lb, cl, s.OK, s.Errors, s.P50, s.P99)
	addrs := make([]string, 0, len(s.ByProvider))
	for a := range s.ByProvider {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		fmt.Printf("  %-22s %7d calls  %5.1f%%\n", a, s.ByProvider[a], 100*float64(s.ByProvider[a])/float64(max(s.OK, 1)))
	}
	for _, k := range slices.Sorted(maps.Keys(s.ErrorsByKind)) {
		fmt.Printf("  error %-16s %7d\n", k, s.ErrorsByKind[k])
		if err := firstErr[k]; err != nil {
			fmt.Printf("    first: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n           "))
		}
		if a := advice[k]; a != "" {
			fmt.Printf("    (%s)\n", a)
		}
	}
}

// kindOf names the class of a failed call for errors_by_kind.
func kindOf(err error) string {
	var se *service.Error
	switch {
	case errors.As(err, &se):
		return "business"
	case errors.Is(err, cluster.ErrNoProvider):
		return "no_provider"
	case errors.Is(err, status.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, status.ErrServerBusy):
		return "server_busy"
	case errors.Is(err, status.ErrConnLost), errors.Is(err, status.ErrClosed), errors.Is(err, status.ErrDial):
		return "connection"
	case errors.Is(err, status.ErrReadOnly):
		return "provider_closing"
	}
	return "other: " + strings.SplitN(err.Error(), ":", 2)[0]
}

func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return float64(s[i].Microseconds()) / 1000
}
