package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/prom"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
	"github.com/minidubbo/minidubbo/serialize"
)

// Option configures an Application.
type Option func(*Application) error

// WithLogger sets the logger of the application and of every component it
// builds (default: the one Config.Logging describes, warnings and errors to
// standard error).
func WithLogger(l *zap.Logger) Option {
	return func(a *Application) error {
		if l == nil {
			return errors.New("config: WithLogger: nil logger")
		}
		a.log = l
		return nil
	}
}

// WithRegistry uses reg for the registry id instead of building one from
// its address; the application does not close it. The id must be in
// Config.Registries (its address may be any valid one).
func WithRegistry(id string, reg registry.Registry) Option {
	return func(a *Application) error {
		if _, ok := a.cfg.Registries[id]; !ok {
			return fmt.Errorf("config: WithRegistry: unknown registry %q (known: %s)", id, strings.Join(sortedKeys(a.cfg.Registries), ", "))
		}
		a.registries[id] = reg
		a.shared[id] = true
		return nil
	}
}

// WithRegistryFactory adds a registry for addresses of scheme (for example
// "etcd" for etcd://host:port): registries whose address has that scheme
// are opened with f. The built-in schemes are zookeeper, zk and memory.
func WithRegistryFactory(scheme string, f registry.Factory) Option {
	return func(a *Application) error { return a.regTable.Register(scheme, f) }
}

// WithLoadBalance adds a load balancer by name, for references to name in
// their loadbalance key.
func WithLoadBalance(name string, f loadbalance.Factory) Option {
	return func(a *Application) error { return a.balancers.Register(name, f) }
}

// WithCluster adds a fault-tolerance strategy by name, for references to
// name in their cluster key.
func WithCluster(name string, f cluster.StrategyFactory) Option {
	return func(a *Application) error { return a.strategies.Register(name, f) }
}

// FilterOption places filters for WithFilters.
type FilterOption func(*filterSet)

type filterSet struct {
	provider, call, attempt []protocol.Filter
}

// ProviderFilters runs fs on every call a provided service gets, after the
// built-in ones (counting, token, executes), before the service method.
func ProviderFilters(fs ...protocol.Filter) FilterOption {
	return func(s *filterSet) { s.provider = append(s.provider, fs...) }
}

// CallFilters runs fs once per consumer call, above the cluster: before
// the provider is picked, once whatever the retries (after the call
// counting).
func CallFilters(fs ...protocol.Filter) FilterOption {
	return func(s *filterSet) { s.call = append(s.call, fs...) }
}

// AttemptFilters runs fs once per attempt, below the cluster: on the
// provider's invoker, so a retried call passes them again, each time
// with the provider picked (after the attempt counting and the token).
func AttemptFilters(fs ...protocol.Filter) FilterOption {
	return func(s *filterSet) { s.attempt = append(s.attempt, fs...) }
}

// WithFilters adds filters to every provided service and every reference,
// placed by ProviderFilters, CallFilters and AttemptFilters.
func WithFilters(opts ...FilterOption) Option {
	return func(a *Application) error {
		for _, o := range opts {
			o(&a.filters)
		}
		return nil
	}
}

// WithFilter adds a filter by name, for services and references to list in
// their filters, call_filters or attempt_filters keys. The same value
// serves every chain that names it, so it must be safe for concurrent use.
func WithFilter(name string, f protocol.Filter) Option {
	return func(a *Application) error {
		if f == nil {
			return fmt.Errorf("config: WithFilter %q: nil filter", name)
		}
		return a.named.Register(name, f)
	}
}

// WithRouter adds a router by name, for references to list in their
// routers key (next to condition rules). f makes each reference its own
// router, after the built-in tag router and in the order listed.
func WithRouter(name string, f cluster.RouterFactory) Option {
	return func(a *Application) error {
		if f == nil {
			return fmt.Errorf("config: WithRouter %q: nil factory", name)
		}
		return a.routers.Register(name, f)
	}
}

// WithSerializer adds a serialization that services and protocols may
// name in their serialization key, next to msgpack and json (or to those
// of WithProtocolOptions' Serializers table). Every protocol gets it
// (protocol.Settings). Its name and id must be new.
func WithSerializer(s serialize.Serializer) Option {
	return func(a *Application) error {
		if s == nil {
			return errors.New("config: WithSerializer: nil serializer")
		}
		a.serializers = append(a.serializers, s)
		return nil
	}
}

// Application runs the services and references of one Config: Export
// serves a service value, Refer fills a consumer stub, Run waits for
// SIGINT or SIGTERM and shuts everything down gracefully.
type Application struct {
	cfg        Config
	log        *zap.Logger
	monitor    *monitor.Monitor
	reporter   *monitor.Reporter // nil when not reporting
	monLink    *monitorLink
	metrics    *http.Server // nil when not serving /metrics
	metricsLn  net.Listener
	metricsEnd chan struct{}
	balancers  *loadbalance.Table
	strategies *cluster.Table
	protocols  *protocol.Table // by name; built-in dubbo (dubbo.go)
	dubbo      dubboSettings   // from WithProtocolOptions
	tls        tlsConfigs      // from the tls keys of Config, and goTLS
	goTLS      tlsConfigs      // from WithServerTLS and WithClientTLS
	// serializers are added to the protocols' table at New.
	serializers []serialize.Serializer

	filters filterSet                           // from WithFilters
	named   *named.Table[protocol.Filter]       // from WithFilter
	routers *named.Table[cluster.RouterFactory] // from WithRouter

	// mu guards the fields below. It is never held while waiting for a
	// registry: Export, Refer and the monitor link open their registries
	// under it, then register, subscribe and wait without it.
	mu         sync.Mutex
	protos     *protocols
	registries map[string]registry.Registry
	regTable   *registry.Table
	shared     map[string]bool // registries given by WithRegistry
	ports      map[string]int  // protocol id → port once bound
	exports    []*export
	refs       []*reference
	closed     bool
}

type export struct {
	url      *protocol.URL
	exporter protocol.Exporter
	regs     []registry.Registry
}

type reference struct {
	id       string // the reference's id in Config.References
	consumer *protocol.URL
	dir      *registry.Directory // nil for direct references
	direct   []protocol.Invoker
	clusters []*cluster.Invoker
	subs     []registry.Registry
	listener registry.Listener
}

// New validates c and returns an Application for it. c is copied; the
// Application fills in defaults on its copy.
func New(c *Config, opts ...Option) (*Application, error) {
	if c == nil {
		c = &Config{}
	}
	a := &Application{
		cfg:        cloneConfig(*c),
		balancers:  loadbalance.Builtin(),
		strategies: cluster.Builtin(),
		registries: map[string]registry.Registry{},
		regTable: registry.NewTable(map[string]registry.Factory{
			"zookeeper": zookeeper.Open,
			"zk":        zookeeper.Open,
			"memory":    memory.Factory(),
		}),
		shared:  map[string]bool{},
		ports:   map[string]int{},
		named:   named.New[protocol.Filter]("config", "filter", nil),
		routers: named.New[cluster.RouterFactory]("config", "router", nil),
		goTLS:   newTLSConfigs(),
	}
	a.protocols = protocol.NewTable(a.builtinProtocols())
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	sers := a.givenSerializers()
	if sers == nil {
		sers = serialize.BuiltinLimits(serialize.Limits{AllowUnknownFields: a.cfg.Application.UnknownFields == "ignore"})
	}
	for _, s := range a.serializers {
		if err := sers.Register(s); err != nil {
			return nil, fmt.Errorf("config: WithSerializer: %w", err)
		}
	}
	if err := a.cfg.validate(known{
		loadBalances:   a.balancers.Names(),
		clusters:       a.strategies.Names(),
		registries:     a.regTable.Names(),
		protocols:      a.protocols.Names(),
		serializations: sers.Names(),
		filters:        a.named.Names(),
		routers:        a.routers.Names(),
		dubbo:          &a.dubbo,
	}); err != nil {
		return nil, err
	}
	a.dubbo.opts = a.cfg.dubboLimits(a.dubbo.opts)
	if a.log == nil {
		a.log = a.cfg.Logging.newLogger(nil)
	}
	tlsCfgs, err := loadTLS(&a.cfg, a.goTLS)
	if err != nil {
		return nil, err
	}
	a.tls = tlsCfgs
	a.monitor = monitor.New(monitor.WithIdentity(a.cfg.Application.Name, consumerHost), monitor.WithClassifier(classify))
	settings := protocol.Settings{Serializers: sers, Logger: a.log}
	p := newProtocols(a.protocols, settings)
	for _, name := range a.cfg.protocolNames() {
		if _, err := p.get(name); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	a.protos = p
	if mc := a.cfg.Monitor; mc.Reporting() {
		a.monLink = &monitorLink{a: a, protos: newProtocols(a.protocols, settings)}
		a.reporter, err = monitor.NewReporter(a.monitor, monitor.ReporterOptions{
			Send:          a.monLink.send,
			Interval:      mc.Interval,
			BufferReports: mc.BufferReports,
			BufferBytes:   mc.BufferBytes,
			Host:          a.reportHost,
			Logger:        a.log.Named("monitor"),
		})
		if err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("config: monitor: %w", err)
		}
	}
	if addr := a.cfg.Monitor.Metrics; addr != "" {
		if err := a.serveMetrics(addr); err != nil {
			if a.reporter != nil {
				_ = a.reporter.Close(context.Background())
			}
			_ = p.Close()
			return nil, err
		}
	}
	return a, nil
}

// serveMetrics serves the application's counts to Prometheus at
// http://addr/metrics until Shutdown.
func (a *Application) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("config: monitor.metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.MetricsHandler())
	a.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(a.log.Named("metrics"))}
	a.metricsLn = ln
	a.metricsEnd = make(chan struct{})
	go func() {
		defer close(a.metricsEnd)
		_ = a.metrics.Serve(ln)
	}()
	a.log.Info("serving metrics", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return nil
}

// MetricsAddr returns the address /metrics is served on (Config.Monitor.Metrics
// with the real port), or "" when it is not served.
func (a *Application) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}

// Reporter returns the reporter that sends the application's counts to
// the monitor service, or nil when Config.Monitor asks for no reports.
func (a *Application) Reporter() *monitor.Reporter { return a.reporter }

// reportHost is the host reports carry: the first exported address, or
// consumerHost for an application that exports nothing.
func (a *Application) reportHost() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.exports) > 0 {
		return a.exports[0].url.Address()
	}
	return consumerHost
}

// monitorLink is the application's reference to the monitor service,
// made on the first report and kept: through the registries like any
// other reference, or to Config.Monitor.Address. It has its own protocols
// (connections), so the last report still goes out after the
// application's own connections closed at shutdown, and its calls are not
// counted.
type monitorLink struct {
	a      *Application
	protos *protocols

	mu     sync.Mutex
	ref    *reference
	client monitor.CollectorClient
}

func (l *monitorLink) send(ctx context.Context, r *monitor.Report) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ref == nil {
		if err := l.connect(ctx); err != nil {
			return err
		}
	}
	return l.client.Collect(ctx, r)
}

// connect refers the monitor service (l.mu held).
func (l *monitorLink) connect(ctx context.Context) error {
	mc := l.a.cfg.Monitor
	retries := DefaultRetries
	rc := ReferenceConfig{
		Interface: monitor.ServiceName, URL: mc.Address, Registries: mc.Registries,
		LoadBalance: loadbalance.Default, Cluster: cluster.DefaultStrategy, Retries: &retries, Timeout: monitor.DefaultSendTimeout,
	}
	// Only opening the registries takes the application's lock: building
	// the reference waits for a provider list (up to the registries'
	// timeout), which must not hold up Export and Refer meanwhile.
	l.a.mu.Lock()
	regs, err := l.a.referRegistries(rc)
	l.a.mu.Unlock()
	if err != nil {
		return err
	}
	ref, err := l.a.buildRef(ctx, refSpec{
		key: "monitor", id: "monitor", rc: rc, regs: regs, proto: l.protos,
		bind: func(inv protocol.Invoker) error { return proxy.Refer(&l.client, inv) },
	})
	if err != nil {
		return err
	}
	l.ref = ref
	return nil
}

func (l *monitorLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ref != nil {
		l.ref.close()
	}
	_ = l.protos.Close()
}

func cloneConfig(c Config) Config {
	c.Registries = cloneMap(c.Registries)
	c.Protocols = cloneMap(c.Protocols)
	c.Services = cloneMap(c.Services)
	c.References = cloneMap(c.References)
	c.Monitor.Registries = slices.Clone(c.Monitor.Registries)
	return c
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Config returns the validated configuration, with defaults filled in.
func (a *Application) Config() Config { return a.cfg }

// Monitor returns the monitor that counts every call of the application on
// both sides.
func (a *Application) Monitor() *monitor.Monitor { return a.monitor }

// registry returns the registry with id, connecting it on first use.
func (a *Application) registry(id string) (registry.Registry, error) {
	if r, ok := a.registries[id]; ok {
		return r, nil
	}
	rc := a.cfg.Registries[id]
	r, err := a.regTable.Open(rc.Address, registry.Options{
		Application:    a.cfg.Application.Name,
		SessionTimeout: rc.ZooKeeper.SessionTimeout,
		Username:       rc.ZooKeeper.Username,
		Password:       rc.ZooKeeper.Password,
		CacheFile:      rc.CacheFile,
		Params:         rc.ZooKeeper.params(),
		Logger:         a.log.Named("registry").With(zap.String("registry", id)),
	})
	if err != nil {
		return nil, fmt.Errorf("config: registries.%s: %w", id, err)
	}
	a.registries[id] = r
	return r, nil
}

func (a *Application) registriesFor(ids []string) ([]registry.Registry, error) {
	if len(ids) == 0 {
		ids = sortedKeys(a.cfg.Registries)
	}
	regs := make([]registry.Registry, 0, len(ids))
	for _, id := range ids {
		r, err := a.registry(id)
		if err != nil {
			return nil, err
		}
		regs = append(regs, r)
	}
	return regs, nil
}

// consumerHost is the address consumers register with and report as.
const consumerHost = "127.0.0.1"

// classify adds the cluster's errors to monitor.Classify: a call that
// found no provider (none known, or routing left none) fails "no provider".
func classify(side monitor.Side, err error) string {
	if errors.Is(err, cluster.ErrNoProvider) || errors.Is(err, loadbalance.ErrNoInvokers) {
		return monitor.KindNoProvider
	}
	return monitor.Classify(side, err)
}

func setIf(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// byName returns the filters added with WithFilter under names (checked
// by validate).
func (a *Application) byName(names []string) []protocol.Filter {
	out := make([]protocol.Filter, 0, len(names))
	for _, n := range names {
		if f, err := a.named.Get(n); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// Run blocks until ctx is done or the process gets SIGINT or SIGTERM, then
// shuts the application down gracefully and returns within
// Config.Shutdown.Timeout, whatever the methods in progress do. A second
// SIGINT or SIGTERM during the shutdown ends the process at once, with
// exit status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
// A nil ctx is taken as context.Background().
func (a *Application) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	a.log.Info("running until SIGINT or SIGTERM")
	select {
	case <-ctx.Done():
		a.log.Info("shutting down", zap.NamedError("reason", ctx.Err()))
	case sig := <-sigs:
		a.log.Info("shutting down; a second signal exits at once", zap.Stringer("signal", sig))
	}
	dctx, cancel := context.WithTimeout(context.Background(), a.cfg.Shutdown.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(dctx) }()
	select {
	case err := <-done:
		return err
	case sig := <-sigs:
		a.log.Warn("second signal during shutdown; exiting at once", zap.Stringer("signal", sig))
		_ = a.log.Sync()
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		exit(code)
		return nil // not reached, but for a replaced exit
	}
}

// exit ends the process; a variable so that nothing else needs to.
var exit = os.Exit

// Shutdown stops the application gracefully: it unregisters every provided
// service, tells connected consumers at once that this provider is going
// (so they send their next calls elsewhere), waits Config.Shutdown.Wait,
// lets the calls in progress finish, closes references (after their calls
// finish) and registries. It is idempotent.
//
// It returns by ctx's deadline, or after Config.Shutdown.Timeout when ctx
// has none, even when a method in progress ignores its context: such calls
// are abandoned (they go on in the background and their answers are
// dropped), logged and counted by Abandoned, and the error says so. A nil
// ctx is taken as context.Background().
func (a *Application) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	exports, refs := a.exports, a.refs
	a.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.Shutdown.Timeout)
		defer cancel()
	}
	// Every step below is bounded by a deadline a little before ctx's, so
	// that they can report what they gave up; this guard holds the
	// promise even for a step that is not bounded (a registry that does
	// not answer).
	dl, _ := ctx.Deadline()
	inner, cancelInner := context.WithDeadline(ctx, dl.Add(-min(shutdownGrace, time.Until(dl)/10)))
	defer cancelInner()
	done := make(chan error, 1)
	step := &atomic.Value{}
	go func() { done <- a.shutdown(inner, exports, refs, step) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	what, _ := step.Load().(string)
	a.log.Warn("shutdown deadline passed; returning with work unfinished", zap.String("step", what))
	return fmt.Errorf("config: shutdown: %w while %s", ctx.Err(), what)
}

// shutdownGrace is how much sooner than Shutdown's deadline its steps
// stop waiting (at most a tenth of the time it has), leaving the steps
// after a step that waited to its end (abandoning the calls still running
// and counting them, closing the registries) time to run before Shutdown
// returns. 100 ms was not enough on a loaded machine: Shutdown returned
// while the references were still closing and no call was counted
// abandoned.
const shutdownGrace = time.Second

// EmptyProtection returns, by reference id, the addresses of the
// providers that empty protection keeps in use now: the registry lists
// none for the reference's service, but their connections are healthy
// (see ReferenceConfig.EmptyProtection). References following their
// registry are left out.
func (a *Application) EmptyProtection() map[string][]string {
	a.mu.Lock()
	refs := slices.Clone(a.refs)
	a.mu.Unlock()
	out := map[string][]string{}
	for _, r := range refs {
		if r.dir == nil {
			continue
		}
		if kept := r.dir.Protected(); len(kept) > 0 {
			out[r.id] = kept
		}
	}
	return out
}

// MetricsHandler returns the handler of the application's /metrics page
// (served by itself when Config.Monitor.Metrics is set): the monitor's
// counts in Prometheus text format, with
// minidubbo_empty_protected_providers{reference,service}, the providers
// empty protection keeps in use, and minidubbo_shutdown_abandoned_calls.
func (a *Application) MetricsHandler() http.Handler {
	return prom.Handler(a.monitor, appCollector{a})
}

var (
	descEmptyProtected = prometheus.NewDesc("minidubbo_empty_protected_providers",
		"Providers the registry no longer lists that empty protection keeps calling, because their connections are healthy.",
		[]string{"reference", "service"}, nil)
	descAbandoned = prometheus.NewDesc("minidubbo_shutdown_abandoned_calls",
		"Calls to this application's services that a shutdown gave up on.", nil, nil)
)

// appCollector exports the application's own state to Prometheus.
type appCollector struct{ a *Application }

func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEmptyProtected
	ch <- descAbandoned
}

func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	protected := c.a.EmptyProtection()
	c.a.mu.Lock()
	refs := slices.Clone(c.a.refs)
	c.a.mu.Unlock()
	for _, r := range refs {
		if r.dir == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descEmptyProtected, prometheus.GaugeValue,
			float64(len(protected[r.id])), r.id, c.a.cfg.References[r.id].Interface)
	}
	ch <- prometheus.MustNewConstMetric(descAbandoned, prometheus.CounterValue, float64(c.a.Abandoned()))
}

// Abandoned returns how many calls to this application's services the
// shutdown gave up on, because their methods had not returned by the
// deadline.
func (a *Application) Abandoned() uint64 { return a.protos.Abandoned() }

func (a *Application) shutdown(ctx context.Context, exports []*export, refs []*reference, step *atomic.Value) error {
	var errs []error
	// Its own providers leave first: the references' directories say so
	// at info, not as a warning (registry.Directory.ShuttingDown).
	for _, r := range refs {
		if r.dir != nil {
			r.dir.ShuttingDown()
		}
	}
	step.Store("unregistering")
	for _, e := range exports {
		for _, r := range e.regs {
			if err := r.Unregister(ctx, e.url); err != nil {
				errs = append(errs, fmt.Errorf("config: unregister %s: %w", e.url.ServiceKey(), err))
			}
		}
	}
	if w := a.cfg.Shutdown.Wait; w > 0 && len(exports) > 0 {
		step.Store("waiting shutdown.wait")
		t := time.NewTimer(w)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// References first, all at once: each closes once the calls it has
	// running finish, or at ctx's end. Then the protocol sends the
	// readonly event to consumers, drains the calls in progress until
	// ctx's end and closes its servers and connections.
	step.Store("closing references")
	var wg sync.WaitGroup
	for _, r := range refs {
		wg.Go(func() { r.closeContext(ctx) })
	}
	wg.Wait()
	step.Store("draining calls in progress")
	before := a.protos.Abandoned()
	if err := a.protos.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("config: protocol shutdown: %w", err))
	}
	if n := a.protos.Abandoned() - before; n > 0 {
		a.log.Warn("shutdown abandoned calls whose methods had not returned by the deadline", zap.Uint64("calls", n))
	}
	// Every call has ended: the last, partial, interval goes to the
	// monitor before the registries close.
	if a.reporter != nil {
		step.Store("sending the last monitor report")
		if err := a.reporter.Close(ctx); err != nil {
			a.log.Warn("last monitor report not sent", zap.Error(err))
		}
		a.monLink.close()
	}
	step.Store("stopping the metrics server")
	if a.metrics != nil {
		if err := a.metrics.Shutdown(ctx); err != nil {
			_ = a.metrics.Close()
		}
		<-a.metricsEnd
	}
	step.Store("closing registries")
	for id, r := range a.registries {
		if a.shared[id] {
			continue
		}
		if err := closeRegistry(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("config: close registry %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// closeRegistry closes r, by ctx's end when r can be told (the ZooKeeper
// registry's CloseContext), so that Shutdown leaves nothing running.
func closeRegistry(ctx context.Context, r registry.Registry) error {
	if c, ok := r.(interface{ CloseContext(context.Context) error }); ok {
		return c.CloseContext(ctx)
	}
	return r.Close()
}
