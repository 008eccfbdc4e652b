package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/server"
	"github.com/minidubbo/minidubbo/monitor/store"
)

const monitorUsage = `usage: minidubbo monitor [flags]

Runs the monitor server: exports the monitor service (%s)
with the framework and registers it, so that applications find it like any
other service; stores every report in SQLite in the data directory; serves
the dashboard at / , the report as JSON at /api/report and Prometheus
metrics at /metrics on the -http address. Runs until SIGINT or SIGTERM.

  minidubbo monitor -registry zookeeper://127.0.0.1:2181 -http 127.0.0.1:8080 -data /var/lib/minidubbo
  minidubbo monitor -registry "" -listen 127.0.0.1:20990   # no registry: report to this address

flags:
`

// defaultDataDir is where the monitor keeps its database by default.
func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "minidubbo", "monitor")
	}
	return "minidubbo-monitor"
}

// monitorConfig is what `minidubbo monitor` runs.
type monitorConfig struct {
	registry, listen, http, data, name string
	retention, refresh                 time.Duration
}

func runMonitor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("monitor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, monitorUsage, monitor.ServiceName)
		fs.PrintDefaults()
	}
	var c monitorConfig
	fs.StringVar(&c.registry, "registry", defaultRegistry, `registry to register the monitor service in ("" for none)`)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:0", "host:port the monitor service listens on (port 0: any free port)")
	fs.StringVar(&c.http, "http", "127.0.0.1:8080", "host:port of the dashboard, /api/report and /metrics")
	fs.StringVar(&c.data, "data", defaultDataDir(), "directory of the database")
	retention := fs.String("retention", "7d", "how long history is kept (a duration, or days like 7d)")
	fs.DurationVar(&c.refresh, "refresh", server.DefaultRefresh, "how often the dashboard reloads")
	fs.StringVar(&c.name, "name", "minidubbo-monitor", "application name of the monitor")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "minidubbo monitor: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	var err error
	if c.retention, err = server.ParseDuration(*retention); err != nil || c.retention <= 0 {
		return usageErr(fmt.Errorf("-retention %q: want a positive duration such as 72h or 7d", *retention))
	}
	if c.refresh <= 0 {
		return usageErr(errors.New("-refresh must be positive"))
	}
	if c.registry != "" { // "" is no registry, on purpose
		if _, err := parseRegistryFlag(c.registry, `, or -registry "" for no registry`); err != nil {
			return usageErr(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveMonitor(ctx, c, func(svc, web string) {
		where := "not registered (-registry \"\"): applications report to this address"
		if c.registry != "" {
			where = "registered in " + c.registry
		}
		fmt.Fprintf(stdout, "monitor service %s at %s, %s\n", monitor.ServiceName, svc, where)
		fmt.Fprintf(stdout, "data in %s, kept %v\n", c.data, c.retention)
		fmt.Fprintf(stdout, "dashboard at http://%s/\n", web)
	}); err != nil {
		if errors.Is(err, config.ErrRegistryUnreachable) {
			// config's advice is a YAML key; this is the command line's.
			fmt.Fprintf(stderr, "minidubbo monitor: the registry %s did not answer, so the monitor service was not registered\n%s\n"+
				"(or run the monitor without a registry, -registry \"\" -listen 127.0.0.1:20990, and give the applications that address)\n",
				c.registry, zooKeeperHint(c.registry))
			return 1
		}
		fmt.Fprintf(stderr, "minidubbo monitor: %v\n", err)
		return 1
	}
	return 0
}

// serveMonitor runs the monitor until ctx is done. ready gets the
// addresses of the monitor service and of the HTTP server once both serve.
func serveMonitor(ctx context.Context, c monitorConfig, ready func(service, http string)) error {
	host, portStr, err := net.SplitHostPort(c.listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", c.listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("-listen %q: bad port", c.listen)
	}
	st, err := store.Open(c.data, store.Options{Retention: c.retention})
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := server.New(st, server.Options{Refresh: c.refresh})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", c.http)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("-http: %w (give -http 127.0.0.1:PORT with a free port)", err)
		}
		return fmt.Errorf("-http: %w", err)
	}
	web := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- web.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = web.Shutdown(sctx)
		<-served
	}()

	cfg := &config.Config{
		Application: config.ApplicationConfig{Name: c.name},
		Protocols:   map[string]config.ProtocolConfig{"dubbo": {Host: host, Port: port}},
		Services:    map[string]config.ServiceConfig{"monitor": {Interface: monitor.ServiceName}},
	}
	if c.registry != "" {
		cfg.Registries = map[string]config.RegistryConfig{"default": {Address: c.registry}}
	}
	app, err := config.New(cfg)
	if err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	u, err := app.Export(ectx, "monitor", srv.Collector())
	cancel()
	if err != nil {
		_ = app.Shutdown(context.Background())
		if errors.Is(err, syscall.EADDRINUSE) {
			// config's advice names protocols.dubbo.port; here it is -listen.
			return fmt.Errorf("-listen: %w (give -listen 127.0.0.1:PORT with a free port, or port 0 for any free port)", config.WithoutAdvice(err))
		}
		return err
	}
	ready(u.Address(), ln.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-served:
		served <- err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := app.Shutdown(sctx); err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
