// Command provider serves the hello example's Greeter and registers it in
// ZooKeeper. It prints "serving NAME at HOST:PORT" once registered and runs
// until SIGINT or SIGTERM, then shuts down gracefully. When ZooKeeper does
// not answer within the registry timeout (5 s) it exits with status 1 and
// says which registry it could not reach.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/examples/hello/greeter"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run() error {
	reg := flag.String("registry", "zookeeper://127.0.0.1:2181", "registry address")
	port := flag.Int("port", 0, "port to serve on (0: any free port)")
	weight := flag.Int("weight", 100, "load-balancing weight")
	delay := flag.Duration("delay", 0, "latency added to every call, for experiments")
	name := flag.String("name", "", "name shown in replies (default: the host:port)")
	warmup := flag.Duration("warmup", 0, "warm-up period over which the weight grows (0: none)")
	verbose := flag.Bool("v", false, "log registry and connection events")
	reportInterval := flag.Duration("report-interval", 0, "send call counts to the monitor service, found in the registry, this often (at least 1s; 0: do not report)")
	monitorAddr := flag.String("monitor", "", "report to the monitor service at this host:port instead of finding it in the registry (with -report-interval; default 60s)")
	metrics := flag.String("metrics", "", "serve this process's call counts to Prometheus at http://HOST:PORT/metrics")
	flag.Parse()

	// Warnings and errors go to stderr (config's default); -v adds the
	// registry, session and provider-list events.
	logging := config.LoggingConfig{}
	if *verbose {
		logging.Level = "info"
	}
	w := *weight
	wu := *warmup
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "hello-provider"},
		Registries:  map[string]config.RegistryConfig{"default": {Address: *reg}},
		Protocols:   map[string]config.ProtocolConfig{"dubbo": {Port: *port}},
		Monitor:     config.MonitorConfig{Interval: *reportInterval, Address: *monitorAddr, Metrics: *metrics},
		Services: map[string]config.ServiceConfig{"greeter": {
			Interface: greeter.Interface, Weight: &w, Warmup: &wu,
		}},
		Logging: logging,
	})
	flags := map[string]string{
		"registries.default.address": "-registry",
		"protocols.dubbo.port":       "-port",
		"services.greeter.weight":    "-weight",
		"services.greeter.warmup":    "-warmup",
		"monitor.interval":           "-report-interval",
		"monitor.address":            "-monitor",
		"monitor.metrics":            "-metrics",
	}
	if err != nil {
		return greeter.FlagHint(err, flags, "")
	}
	svc := &greeter.Service{Name: *name, Delay: *delay}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	u, err := app.Export(ctx, "greeter", svc)
	cancel()
	if err != nil {
		_ = app.Shutdown(context.Background())
		if errors.Is(err, syscall.EADDRINUSE) {
			return greeter.FlagHint(err, flags, "give -port a free port, or -port 0 for any free port")
		}
		return greeter.RegistryHint(err, *reg)
	}
	svc.SetAddr(u.Address())
	if svc.Name == "" {
		svc.Name = u.Address()
	}
	fmt.Printf("serving %s at %s (weight %d)\n", svc.Name, u.Address(), w)
	return app.Run(context.Background())
}
