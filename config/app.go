package config

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strconv"
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
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
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

// WithSerializer adds a serialization that services and protocols may
// name in their serialization key, next to msgpack and json (and to those
// of WithProtocolOptions' Serializers table). Its name and id must be new.
func WithSerializer(s serialize.Serializer) Option {
	return func(a *Application) error {
		if s == nil {
			return errors.New("config: WithSerializer: nil serializer")
		}
		a.serializers = append(a.serializers, s)
		return nil
	}
}

// WithProtocolOptions sets the options of the dubbo protocol (payload
// limit, heartbeat, dispatch limit, TLS, ...).
func WithProtocolOptions(o dubbo.Options) Option {
	return func(a *Application) error {
		a.protoOpts = o
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
	protoOpts  dubbo.Options
	tls        tlsConfigs // from the tls keys of Config, and goTLS
	goTLS      tlsConfigs // from WithServerTLS and WithClientTLS
	// serializers are added to the protocol's table at New.
	serializers []serialize.Serializer

	filters filterSet                     // from WithFilters
	named   *named.Table[protocol.Filter] // from WithFilter

	mu         sync.Mutex
	proto      *dubbo.Protocol
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
		shared: map[string]bool{},
		ports:  map[string]int{},
		named:  named.New[protocol.Filter]("config", "filter", nil),
		goTLS:  newTLSConfigs(),
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	po := a.protoOpts
	if po.Serializers == nil {
		po.Serializers = serialize.BuiltinLimits(serialize.Limits{AllowUnknownFields: a.cfg.Application.UnknownFields == "ignore"})
	}
	for _, s := range a.serializers {
		if err := po.Serializers.Register(s); err != nil {
			return nil, fmt.Errorf("config: WithSerializer: %w", err)
		}
	}
	if err := a.cfg.validate(known{
		loadBalances:   a.balancers.Names(),
		clusters:       a.strategies.Names(),
		registries:     a.regTable.Names(),
		serializations: po.Serializers.Names(),
		filters:        a.named.Names(),
	}); err != nil {
		return nil, err
	}
	if a.log == nil {
		a.log = a.cfg.Logging.newLogger(nil)
	}
	tlsCfgs, err := loadTLS(&a.cfg, a.goTLS)
	if err != nil {
		return nil, err
	}
	a.tls = tlsCfgs
	a.monitor = monitor.New(monitor.WithIdentity(a.cfg.Application.Name, consumerHost), monitor.WithClassifier(classify))
	if po.Logger == nil {
		po.Logger = a.log.Named("dubbo")
	}
	p, err := dubbo.New(&po)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	a.proto = p
	if mc := a.cfg.Monitor; mc.Reporting() {
		a.monLink = &monitorLink{a: a, opts: po}
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
// other reference, or to Config.Monitor.Address. It has its own protocol
// (connections), so the last report still goes out after the
// application's own connections closed at shutdown, and its calls are not
// counted.
type monitorLink struct {
	a    *Application
	opts dubbo.Options

	mu     sync.Mutex
	proto  *dubbo.Protocol
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
	if l.proto == nil {
		p, err := dubbo.New(&l.opts)
		if err != nil {
			return err
		}
		l.proto = p
	}
	mc := l.a.cfg.Monitor
	retries := DefaultRetries
	rc := ReferenceConfig{
		Interface: monitor.ServiceName, URL: mc.Address, Registries: mc.Registries,
		LoadBalance: "random", Cluster: "failover", Retries: &retries, Timeout: monitor.DefaultSendTimeout,
	}
	l.a.mu.Lock()
	defer l.a.mu.Unlock()
	ref, err := l.a.buildRef(ctx, "monitor", rc, l.proto, false, func(inv protocol.Invoker) error { return proxy.Refer(&l.client, inv) })
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
	if l.proto != nil {
		_ = l.proto.Close()
	}
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
		Timeout:        rc.Timeout,
		SessionTimeout: rc.SessionTimeout,
		Username:       rc.Username,
		Password:       rc.Password,
		CacheFile:      rc.CacheFile,
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

// Export serves impl as the service id of Config.Services and registers it
// in the service's registries. impl's exported methods of the form
// func(ctx, args...) (T, error) or func(ctx, args...) error are served. It
// returns the registered provider URL, which carries the real port (or the
// protocol's RegisterAddress, when one is set).
func (a *Application) Export(ctx context.Context, id string, impl any) (*protocol.URL, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errors.New("config: export: application is shut down")
	}
	sc, ok := a.cfg.Services[id]
	if !ok {
		return nil, fmt.Errorf("config: export: unknown service %q (known: %s)", id, strings.Join(sortedKeys(a.cfg.Services), ", "))
	}
	pc := a.cfg.Protocols[sc.Protocol]
	port := pc.Port
	if p, ok := a.ports[sc.Protocol]; ok {
		port = p
	}
	params := map[string]string{
		protocol.KeyInterface:     sc.Interface,
		protocol.KeyApplication:   a.cfg.Application.Name,
		protocol.KeySide:          "provider",
		protocol.KeyTimestamp:     strconv.FormatInt(time.Now().UnixMilli(), 10),
		protocol.KeyTimeout:       strconv.FormatInt(sc.Timeout.Milliseconds(), 10),
		protocol.KeySerialization: pc.Serialization,
	}
	setIf(params, protocol.KeyVersion, sc.Version)
	setIf(params, protocol.KeyGroup, sc.Group)
	setIf(params, protocol.KeyTag, sc.Tag)
	if sc.Weight != nil {
		params[protocol.KeyWeight] = strconv.Itoa(*sc.Weight)
	}
	if sc.Warmup != nil {
		params[protocol.KeyWarmup] = strconv.FormatInt(sc.Warmup.Milliseconds(), 10)
	}
	if sc.Executes > 0 {
		params[protocol.KeyExecutes] = strconv.Itoa(sc.Executes)
	}
	token := sc.Token
	if token == "true" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("config: export %s: token: %w", id, err)
		}
		token = hex.EncodeToString(b[:])
	}
	setIf(params, protocol.KeyToken, token)
	u := protocol.NewURL(dubbo.Name, pc.Host, port, sc.Interface, params)
	prov, err := proxy.NewProvider(u, impl)
	if err != nil {
		return nil, fmt.Errorf("config: export %s: %w", id, err)
	}
	u = u.With(protocol.KeyMethods, strings.Join(prov.Methods(), ",")).With(proxy.KeySignatures, prov.Signatures())
	counting := a.monitor.ProviderFilter()
	if port != 0 {
		counting.SetAddr(net.JoinHostPort(pc.Host, strconv.Itoa(port)))
	}
	filters := []protocol.Filter{counting}
	// The token is not a filter here: the dubbo protocol checks it from the
	// URL before any argument is decoded.
	if sc.Executes > 0 {
		filters = append(filters, filter.NewExecutes(sc.Executes))
	}
	filters = append(filters, a.filters.provider...)
	filters = append(filters, a.byName(sc.Filters)...)
	exp, err := a.proto.ExportTLS(&urlInvoker{Invoker: protocol.Chain(prov, filters...), url: u}, a.tls.server[sc.Protocol])
	if err != nil {
		return nil, fmt.Errorf("config: export %s: %w", id, err)
	}
	real := exp.URL()
	counting.SetAddr(real.Address())
	a.ports[sc.Protocol] = real.Port
	if pc.RegisterAddress != "" { // checked by validate
		host, port, _ := splitRegisterAddress(pc.RegisterAddress)
		real = protocol.NewURL(real.Protocol, host, port, real.Path, real.Params())
	}
	regs, err := a.registriesFor(sc.Registries)
	if err == nil {
		for i, r := range regs {
			regID := a.registryIDs(sc.Registries)[i]
			if check := a.cfg.Registries[regID].Check; check == nil || *check {
				if err = a.awaitRegistry(ctx, regID, r, "service "+id); err != nil {
					err = fmt.Errorf("config: export %s: %w", id, err)
					break
				}
			}
			if err = r.Register(ctx, real); err != nil {
				err = fmt.Errorf("config: export %s: register: %w", id, err)
				break
			}
		}
	}
	if err != nil {
		_ = exp.Unexport()
		return nil, err
	}
	a.exports = append(a.exports, &export{url: real, exporter: exp, regs: regs})
	a.log.Info("exported", zap.String("service", id), zap.Stringer("url", real))
	return real, nil
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

// urlInvoker gives a filter chain the export URL while keeping the
// provider's argument types visible to the protocol.
type urlInvoker struct {
	protocol.Invoker
	url *protocol.URL
}

func (u *urlInvoker) URL() *protocol.URL { return u.url }

// Unwrap lets the protocol find the provider's argument types behind the
// filters.
func (u *urlInvoker) Unwrap() protocol.Invoker { return u.Invoker }

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

// Refer fills stub, a pointer to a struct of func fields, so that its
// calls go to the providers of the reference id of Config.References,
// through the reference's router, load balancer and fault-tolerance
// strategy. See proxy.Refer for the rules on stub's fields.
//
// Refer checks stub against the method signatures the providers listed
// now publish (see ReferenceConfig.Contract) and that every key of the
// reference's methods names a method of stub.
func (a *Application) Refer(ctx context.Context, id string, stub any) error {
	if err := a.checkMethodsKeys(id, stub); err != nil {
		return err
	}
	// The stub is filled on a scratch copy first and handed over only once
	// the contract check passed, so a failed Refer leaves it untouched.
	scratch := scratchStub(stub)
	err := a.refer(ctx, id, func(inv protocol.Invoker) error { return proxy.Refer(scratch, inv) }, stub)
	if err == nil {
		copyFuncs(reflect.ValueOf(stub).Elem(), reflect.ValueOf(scratch).Elem())
	}
	return err
}

// ReferGeneric returns a generic client for the reference id: it calls any
// method by name with []any arguments, without the service's Go types, for
// tools such as the minidubbo CLI. Arguments are converted to the provider's
// parameter types when no value is lost.
func (a *Application) ReferGeneric(ctx context.Context, id string) (*proxy.Generic, error) {
	var g *proxy.Generic
	err := a.refer(ctx, id, func(inv protocol.Invoker) (err error) {
		g, err = proxy.NewGeneric(inv)
		return err
	}, nil)
	return g, err
}

// refer builds the reference id and hands its top invoker to bind.
func (a *Application) refer(ctx context.Context, id string, bind func(protocol.Invoker) error, stub any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errors.New("config: refer: application is shut down")
	}
	rc, ok := a.cfg.References[id]
	if !ok {
		return fmt.Errorf("config: refer: unknown reference %q (known: %s)", id, strings.Join(sortedKeys(a.cfg.References), ", "))
	}
	ref, err := a.buildRef(ctx, "references."+id, rc, a.proto, true, bind)
	if err != nil {
		return err
	}
	if err := a.checkContract(id, rc, ref, stub); err != nil {
		ref.close()
		return err
	}
	ref.id = id
	a.refs = append(a.refs, ref)
	return nil
}

// buildRef builds a reference to rc over p (a.mu held) and hands its top
// invoker to bind. key names it in errors ("references.<id>"). counted
// puts the monitor's filters in its chains.
func (a *Application) buildRef(ctx context.Context, key string, rc ReferenceConfig, p *dubbo.Protocol, counted bool, bind func(protocol.Invoker) error) (*reference, error) {
	id := strings.TrimPrefix(key, "references.")
	params := map[string]string{
		protocol.KeyInterface:   rc.Interface,
		protocol.KeyApplication: a.cfg.Application.Name,
		protocol.KeySide:        "consumer",
		protocol.KeyCategory:    registry.CategoryConsumers,
		protocol.KeyTimestamp:   strconv.FormatInt(time.Now().UnixMilli(), 10),
		protocol.KeyLoadBalance: rc.LoadBalance,
		protocol.KeyCluster:     rc.Cluster,
		protocol.KeyRetries:     strconv.Itoa(*rc.Retries),
	}
	if rc.Timeout > 0 {
		params[protocol.KeyTimeout] = strconv.FormatInt(rc.Timeout.Milliseconds(), 10)
	}
	setIf(params, protocol.KeyVersion, rc.Version)
	setIf(params, protocol.KeyGroup, rc.Group)
	if rc.Hash.Nodes > 0 {
		params[loadbalance.KeyHashNodes] = strconv.Itoa(rc.Hash.Nodes)
	}
	if len(rc.Hash.Arguments) > 0 {
		idx := make([]string, len(rc.Hash.Arguments))
		for i, n := range rc.Hash.Arguments {
			idx[i] = strconv.Itoa(n)
		}
		params[loadbalance.KeyHashArguments] = strings.Join(idx, ",")
	}
	setIf(params, loadbalance.KeyHashAttachment, rc.Hash.Attachment)
	host := consumerHost
	if h, err := os.Hostname(); err == nil && h != "" {
		params["hostname"] = h
	}
	consumer := protocol.NewURL("consumer", host, 0, rc.Interface, params)

	var routers []cluster.Router
	routers = append(routers, cluster.NewTagRouter())
	for i, rule := range rc.Routers {
		r, err := cluster.NewConditionRouter(rule, cluster.ConditionOptions{Consumer: consumer})
		if err != nil {
			return nil, fmt.Errorf("config: %s.routers[%d]: %w", key, i, err)
		}
		routers = append(routers, r)
	}
	ref := &reference{consumer: consumer}
	cparams := consumerTimeouts(rc)
	cparams[protocol.KeyRemoteApplication] = a.cfg.Application.Name
	proto := consumerProtocol{Protocol: p, params: cparams, key: key, log: a.log.Named("directory"),
		tls: a.tls.forReference(key), anyTLS: a.tls.forReference(key) != nil || a.protoOpts.ClientTLS != nil}
	wrap := func(inv protocol.Invoker) protocol.Invoker {
		var fs []protocol.Filter
		if counted {
			fs = append(fs, a.monitor.AttemptFilter(inv.URL().Address()))
		}
		if tok := inv.URL().Param(protocol.KeyToken, ""); tok != "" {
			fs = append(fs, filter.NewTokenAttach(tok))
		}
		fs = append(fs, a.filters.attempt...)
		fs = append(fs, a.byName(rc.AttemptFilters)...)
		return protocol.Chain(inv, fs...)
	}
	var dir cluster.Directory
	if rc.URL != "" {
		for _, s := range strings.Split(rc.URL, ",") {
			u, err := directURL(strings.TrimSpace(s), rc)
			if err != nil {
				ref.closeDirect()
				return nil, fmt.Errorf("config: %s.url: %w", key, err)
			}
			inv, err := proto.refer(u, true)
			if err != nil {
				ref.closeDirect()
				return nil, fmt.Errorf("config: %s.url: %w", key, err)
			}
			ref.direct = append(ref.direct, wrap(inv))
		}
		dir = cluster.NewStatic(ref.direct...)
	} else {
		d, err := registry.NewDirectory(registry.DirectoryOptions{
			Consumer:          consumer,
			Protocol:          proto,
			Wrap:              wrap,
			NoEmptyProtection: rc.EmptyProtection != nil && !*rc.EmptyProtection,
			Logger:            a.log.Named("directory"),
		})
		if err != nil {
			return nil, fmt.Errorf("config: refer %s: %w", id, err)
		}
		ref.dir = d
		dir = d
	}

	// One cluster invoker per load balancer in use: the reference's, and
	// those that methods override.
	byBalancer := map[string]*cluster.Invoker{}
	stats := loadbalance.NewStats(nil) // in-flight and latency per provider, shared by them all
	bopts, err := loadbalance.OptionsFromURL(consumer)
	if err != nil {
		ref.close()
		return nil, fmt.Errorf("config: references.%s.hash: %w", id, err)
	}
	bopts = append(bopts, loadbalance.WithStats(stats))
	methodRetries := map[string]int{}
	for m, mc := range rc.Methods {
		if mc.Retries != nil {
			methodRetries[m] = *mc.Retries
		}
	}
	newCluster := func(lb string) (*cluster.Invoker, error) {
		if c, ok := byBalancer[lb]; ok {
			return c, nil
		}
		c, err := cluster.New(dir, cluster.Options{
			Strategy:        rc.Cluster,
			Strategies:      a.strategies,
			LoadBalance:     lb,
			Balancers:       a.balancers,
			BalancerOptions: bopts,
			Retries:         *rc.Retries,
			MethodRetries:   methodRetries,
			Forks:           rc.Forks,
			FailbackRetries: rc.Failback.Retries,
			FailbackQueue:   rc.Failback.Queue,
			FailbackBackoff: rc.Failback.Backoff,
			FailbackTimeout: rc.Failback.Timeout,
			Routers:         routers,
			Logger:          a.log.Named("cluster"),
			URL:             consumer,
		})
		if err != nil {
			return nil, err
		}
		byBalancer[lb] = c
		ref.clusters = append(ref.clusters, c)
		return c, nil
	}
	top, err := newCluster(rc.LoadBalance)
	if err != nil {
		ref.close()
		return nil, fmt.Errorf("config: refer %s: %w", id, err)
	}
	mi := &methodInvoker{def: top, url: consumer, methods: map[string]methodOptions{}}
	for m, mc := range rc.Methods {
		mo := methodOptions{invoker: top}
		if mc.LoadBalance != "" {
			if mo.invoker, err = newCluster(mc.LoadBalance); err != nil {
				ref.close()
				return nil, fmt.Errorf("config: refer %s method %s: %w", id, m, err)
			}
		}
		mi.methods[m] = mo
	}
	if ref.dir != nil {
		// Rules from the registry's routers category apply after the
		// configured ones.
		ref.listener = &routerListener{Directory: ref.dir, clusters: ref.clusters, fixed: routers, consumer: consumer, log: a.log}
	}
	if ref.dir != nil {
		regs, err := a.registriesFor(rc.Registries)
		if err != nil {
			ref.close()
			return nil, err
		}
		for _, r := range regs {
			if err := r.Subscribe(consumer, ref.listener); err != nil {
				ref.close()
				return nil, fmt.Errorf("config: refer %s: subscribe: %w", id, err)
			}
			ref.subs = append(ref.subs, r)
			// Consumers register themselves too, as Dubbo's do; a failure
			// here does not stop calls, and a registry that does not answer
			// now gets the registration in the background.
			rctx := ctx
			if hr, ok := r.(registry.HealthReporter); ok && !hr.Health(nil).Connected {
				var cancel context.CancelFunc
				rctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			if err := r.Register(rctx, consumer); err != nil {
				a.log.Warn("register consumer", zap.String("reference", id), zap.Error(err))
			}
		}
		// Wait for the first provider list (from the registry, or from the
		// cache when the registry is unreachable), so that the first call
		// does not fail for want of a list that is on its way.
		wait := a.referWait(rc.Registries)
		wctx, cancel := context.WithTimeout(ctx, wait)
		if err = ref.dir.WaitReady(wctx); err != nil {
			err = fmt.Errorf("%w %s: no provider list within %v (%w)", cluster.ErrNoProvider, consumer.ServiceKey(), wait, err)
		}
		cancel()
		if rc.Check {
			if err == nil && len(ref.dir.Snapshot().Invokers()) == 0 {
				err = fmt.Errorf("%w %s", cluster.ErrNoProvider, consumer.ServiceKey())
			}
			if err != nil {
				asked := a.describeRegistries(a.registryIDs(rc.Registries), ref.subs, consumer)
				ref.close()
				return nil, fmt.Errorf("config: refer %s: check: %w; asked %s", id, err, asked)
			}
		} else if err != nil {
			a.log.Warn("no provider list yet (registry unreachable and nothing cached?); calls fail until one arrives",
				zap.String("reference", id), zap.String("service", consumer.ServiceKey()),
				zap.String("registries", a.describeRegistries(a.registryIDs(rc.Registries), ref.subs, consumer)), zap.Error(err))
		}
	}
	// The call-level counts go above the cluster: once per call, whether
	// or not it reached a provider.
	var head protocol.Invoker = mi
	if ref.dir != nil {
		regIDs, regs := a.registryIDs(rc.Registries), ref.subs
		head = explainingInvoker{Invoker: mi, explain: func() string { return a.describeRegistries(regIDs, regs, consumer) }}
	}
	var calls []protocol.Filter
	if counted {
		calls = append(calls, a.monitor.CallFilter())
	}
	calls = append(calls, a.filters.call...)
	calls = append(calls, a.byName(rc.CallFilters)...)
	head = protocol.Chain(head, calls...)
	if err := bind(head); err != nil {
		ref.close()
		return nil, fmt.Errorf("config: refer %s: %w", id, err)
	}
	return ref, nil
}

// referWait is how long Refer waits for a first provider list: the
// longest timeout of the reference's registries.
func (a *Application) referWait(ids []string) time.Duration {
	if len(ids) == 0 {
		ids = sortedKeys(a.cfg.Registries)
	}
	var d time.Duration
	for _, id := range ids {
		d = max(d, a.cfg.Registries[id].Timeout)
	}
	return d
}

func directURL(s string, rc ReferenceConfig) (*protocol.URL, error) {
	if !strings.Contains(s, "://") {
		s = "dubbo://" + s
	}
	u, err := protocol.ParseURL(s)
	if err != nil {
		return nil, err
	}
	if u.Path == "" {
		u.Path = rc.Interface
	}
	if u.Port == 0 {
		return nil, fmt.Errorf("%q: missing port", s)
	}
	u = u.With(protocol.KeyInterface, rc.Interface)
	if rc.Version != "" {
		u = u.With(protocol.KeyVersion, rc.Version)
	}
	if rc.Group != "" {
		u = u.With(protocol.KeyGroup, rc.Group)
	}
	return u, nil
}

// consumerTimeouts returns the reference's own timeouts, in milliseconds,
// as URL parameters the dubbo protocol reads, each with the setting it
// comes from (protocol.KeyTimeoutSource) for timeout errors to name:
// "timeout" when the reference sets one (a defaulted one is not laid over
// the provider's advertised timeout), and "{method}.timeout" for each
// method that sets one.
func consumerTimeouts(rc ReferenceConfig) map[string]string {
	p := map[string]string{}
	if rc.Timeout > 0 && !rc.timeoutDefaulted {
		p[protocol.KeyTimeout] = strconv.FormatInt(rc.Timeout.Milliseconds(), 10)
		p[protocol.KeyTimeoutSource] = protocol.TimeoutSourceValue(status.SourceReference)
	}
	for m, mc := range rc.Methods {
		if mc.Timeout > 0 {
			p[m+"."+protocol.KeyTimeout] = strconv.FormatInt(mc.Timeout.Milliseconds(), 10)
			p[m+"."+protocol.KeyTimeoutSource] = protocol.TimeoutSourceValue(status.SourceMethod)
		}
	}
	return p
}

// consumerProtocol refers providers with the consumer's parameters laid
// over theirs, so the protocol reads them once per provider rather than per
// call. Timeouts follow Dubbo's precedence: the consumer's method timeout,
// else the consumer's reference timeout, else the provider's method
// timeout, else the provider's service timeout. So when the reference sets
// a timeout, the provider's per-method timeouts are dropped: they must not
// beat it.
type consumerProtocol struct {
	protocol.Protocol
	params map[string]string
	// For TLS (see referTLS): the reference's configuration (nil: the
	// protocol's), whether it speaks TLS at all, its key in errors.
	tls    *tls.Config
	anyTLS bool
	key    string
	log    *zap.Logger
}

func (c consumerProtocol) Refer(u *protocol.URL) (protocol.Invoker, error) { return c.refer(u, false) }

// refer refers u; direct says it comes from the reference's url key.
func (c consumerProtocol) refer(u *protocol.URL, direct bool) (protocol.Invoker, error) {
	_, refTimeout := c.params[protocol.KeyTimeout]
	params := u.Params()
	for k := range params {
		switch {
		case k == protocol.KeyTimeoutSource || strings.HasSuffix(k, "."+protocol.KeyTimeoutSource):
			delete(params, k) // the consumer's own parameter; a provider's is a lie
		case refTimeout && strings.HasSuffix(k, "."+protocol.KeyTimeout):
			delete(params, k)
		}
	}
	for k, v := range c.params {
		params[k] = v
	}
	return referTLS(c.Protocol, protocol.NewURL(u.Protocol, u.Host, u.Port, u.Path, params), c.tls, c.anyTLS, c.key, direct, c.log)
}

// routerListener keeps the cluster invokers' routers in step with the
// routing rules the registry holds for the service.
type routerListener struct {
	*registry.Directory
	clusters []*cluster.Invoker
	fixed    []cluster.Router
	consumer *protocol.URL
	log      *zap.Logger
}

func (l *routerListener) NotifyRouters(urls []*protocol.URL) {
	rs, err := cluster.RoutersFromURLs(urls, l.consumer)
	if err != nil {
		l.log.Warn("bad routing rule in registry; keeping the previous rules", zap.Error(err))
		return
	}
	all := append(append([]cluster.Router{}, l.fixed...), rs...)
	for _, c := range l.clusters {
		c.SetRouters(all)
	}
}

type methodOptions struct {
	invoker protocol.Invoker
}

// methodInvoker sends each method's calls to the cluster invoker of its
// load balancer. Retries are the cluster invoker's per-method setting and
// timeouts are laid over the provider URLs at refer time (see
// consumerProtocol): no setting rides on the call's attachments.
type methodInvoker struct {
	def     protocol.Invoker
	url     *protocol.URL
	methods map[string]methodOptions
}

func (m *methodInvoker) URL() *protocol.URL { return m.url }

func (m *methodInvoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	next := m.def
	if mo, ok := m.methods[inv.Method]; ok {
		next = mo.invoker
	}
	return next.Invoke(ctx, inv)
}

func (r *reference) closeDirect() {
	for _, inv := range r.direct {
		if c, ok := inv.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

func (r *reference) close() { r.closeContext(context.Background()) }

// closeContext closes the reference, waiting for the calls it has running
// until ctx is done at the latest.
func (r *reference) closeContext(ctx context.Context) {
	for _, reg := range r.subs {
		_ = reg.Unsubscribe(r.consumer, r.listener)
		_ = reg.Unregister(ctx, r.consumer)
	}
	for _, c := range r.clusters {
		_ = c.Close()
	}
	if r.dir != nil {
		_ = r.dir.CloseContext(ctx)
	}
	r.closeDirect()
}

// Run blocks until ctx is done or the process gets SIGINT or SIGTERM, then
// shuts the application down gracefully and returns within
// Config.Shutdown.Timeout, whatever the methods in progress do. A second
// SIGINT or SIGTERM during the shutdown ends the process at once, with
// exit status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
func (a *Application) Run(ctx context.Context) error {
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
// dropped), logged and counted by Abandoned, and the error says so.
func (a *Application) Shutdown(ctx context.Context) error {
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
// stop waiting (at most a tenth of the time it has).
const shutdownGrace = 100 * time.Millisecond

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
func (a *Application) Abandoned() uint64 { return a.proto.Abandoned() }

func (a *Application) shutdown(ctx context.Context, exports []*export, refs []*reference, step *atomic.Value) error {
	var errs []error
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
	before := a.proto.Abandoned()
	if err := a.proto.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("config: protocol shutdown: %w", err))
	}
	if err := a.proto.Close(); err != nil {
		errs = append(errs, err)
	}
	if n := a.proto.Abandoned() - before; n > 0 {
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
		if err := r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("config: close registry %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
