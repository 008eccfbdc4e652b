package config

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/status"
)

// Refer fills stub, a pointer to a struct of func fields, so that its
// calls go to the providers of the reference id of Config.References,
// through the reference's router, load balancer and fault-tolerance
// strategy. See proxy.Refer for the rules on stub's fields.
//
// Refer checks stub against the method signatures the providers listed
// now publish (see ReferenceConfig.Contract) and that every key of the
// reference's methods names a method of stub.
//
// Refer waits for the reference's first provider list (at most the
// longest timeout of its registries) without holding up the rest of the
// application; a Refer still waiting when Shutdown begins fails. A nil
// ctx is an error (pass context.Background()).
func (a *Application) Refer(ctx context.Context, id string, stub any) error {
	if ctx == nil {
		return fmt.Errorf("config: refer %s: %w", id, errNilContext)
	}
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
// parameter types when no value is lost. A nil ctx is an error, as for
// Refer.
func (a *Application) ReferGeneric(ctx context.Context, id string) (*proxy.Generic, error) {
	if ctx == nil {
		return nil, fmt.Errorf("config: refer %s: %w", id, errNilContext)
	}
	var g *proxy.Generic
	err := a.refer(ctx, id, func(inv protocol.Invoker) (err error) {
		g, err = proxy.NewGeneric(inv)
		return err
	}, nil)
	return g, err
}

// refer builds the reference id, hands its top invoker to bind, checks
// stub (nil for none) against the providers' contract and keeps the
// reference for Shutdown. Only opening the registries and keeping the
// reference take a.mu: waiting for a provider list (up to the registries'
// timeout) holds up no other Refer, Export, Shutdown or /metrics.
func (a *Application) refer(ctx context.Context, id string, bind func(protocol.Invoker) error, stub any) error {
	rc, regs, err := a.referStart(id)
	if err != nil {
		return err
	}
	ref, err := a.buildRef(ctx, refSpec{
		key: "references." + id, id: id, rc: rc, regs: regs,
		proto: a.protos, counted: true, bind: bind,
	})
	if err != nil {
		return err
	}
	if err := a.checkContract(id, rc, ref, stub); err != nil {
		ref.close()
		return err
	}
	ref.id = id
	return a.keepRef(ref)
}

// referStart looks the reference id up and opens its registries, unless
// the application is shut down.
func (a *Application) referStart(id string) (ReferenceConfig, []registry.Registry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ReferenceConfig{}, nil, errShutDown
	}
	rc, ok := a.cfg.References[id]
	if !ok {
		return rc, nil, fmt.Errorf("config: refer: unknown reference %q (known: %s)", id, strings.Join(sortedKeys(a.cfg.References), ", "))
	}
	regs, err := a.referRegistries(rc)
	return rc, regs, err
}

// keepRef keeps ref for Shutdown to close, or closes it when Shutdown
// began while it was being built.
func (a *Application) keepRef(ref *reference) error {
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.refs = append(a.refs, ref)
	}
	a.mu.Unlock()
	if closed {
		ref.close()
		return errShutDown
	}
	return nil
}

var errShutDown = errors.New("config: refer: application is shut down")

// referRegistries opens the registries the reference rc finds its
// providers in: none for a reference with a url (a.mu held).
func (a *Application) referRegistries(rc ReferenceConfig) ([]registry.Registry, error) {
	if rc.URL != "" {
		return nil, nil
	}
	return a.registriesFor(rc.Registries)
}

// refSpec is one reference for buildRef to build: its settings and what
// it is built with.
type refSpec struct {
	key  string // names its settings in errors: "references.<id>" or "monitor"
	id   string // names it in errors and logs
	rc   ReferenceConfig
	regs []registry.Registry // opened registries to subscribe to (none with rc.URL)
	// proto refers the providers (by the scheme of their URLs).
	proto protocol.Protocol
	// counted puts the monitor's counting filters in the chains.
	counted bool
	// bind gets the top invoker (it fills the stub).
	bind func(protocol.Invoker) error
}

// buildRef builds the reference s describes and hands its top invoker to
// s.bind. It takes no lock (its registries are open already), so that
// while it waits for a provider list it holds up no Export or Refer.
//
// The steps, each a function below: describe the consumer (consumerURL),
// compile the configured routers, make the providers' directory with
// each provider's attempt filters (providerDirectory), join it into
// cluster invokers, one per load balancer in use (clusterInvokers),
// subscribe and register the consumer in the registries (subscribe),
// wait for a first provider list (awaitProviders), and put the call
// filters on top (callChain).
func (a *Application) buildRef(ctx context.Context, s refSpec) (*reference, error) {
	consumer := a.consumerURL(s.rc)
	routers, err := a.configuredRouters(s, consumer)
	if err != nil {
		return nil, err
	}
	ref := &reference{consumer: consumer}
	dir, err := a.providerDirectory(ref, s)
	if err != nil {
		return nil, err
	}
	methods, err := a.clusterInvokers(ref, s, dir, routers)
	if err != nil {
		ref.close()
		return nil, err
	}
	if ref.dir != nil {
		if err := a.subscribe(ctx, ref, s, routers); err != nil {
			ref.close()
			return nil, err
		}
		if err := a.awaitProviders(ctx, ref, s); err != nil {
			ref.close()
			return nil, err
		}
	}
	if err := s.bind(a.callChain(s, methods)); err != nil {
		ref.close()
		return nil, fmt.Errorf("config: refer %s: %w", s.id, err)
	}
	return ref, nil
}

// consumerURL describes the consumer of rc: what it registers, what
// routers match on, and the settings its load balancers read (the
// consistenthash ones).
func (a *Application) consumerURL(rc ReferenceConfig) *protocol.URL {
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
	if h, err := os.Hostname(); err == nil && h != "" {
		params["hostname"] = h
	}
	return protocol.NewURL("consumer", consumerHost, 0, rc.Interface, params)
}

// configuredRouters are the reference's routers: the tag router, then its
// routers in order, each a router added with WithRouter or a condition
// rule.
func (a *Application) configuredRouters(s refSpec, consumer *protocol.URL) ([]cluster.Router, error) {
	routers := []cluster.Router{cluster.NewTagRouter()}
	for i, rule := range s.rc.Routers {
		var r cluster.Router
		f, err := a.routers.Get(rule)
		if err == nil {
			if r, err = f(consumer); err == nil && r == nil {
				err = fmt.Errorf("router %q: the factory made no router", rule)
			}
		} else {
			r, err = cluster.NewConditionRouter(rule, cluster.ConditionOptions{Consumer: consumer})
		}
		if err != nil {
			return nil, fmt.Errorf("config: %s.routers[%d]: %w", s.key, i, err)
		}
		routers = append(routers, r)
	}
	return routers, nil
}

// providerDirectory makes where the reference's providers come from: the
// fixed list of its url, each provider referred now, or a registry
// directory that refers them as the registries list them (ref.dir). Both
// refer with the consumer's own timeouts laid over the providers' and
// with the reference's TLS settings (consumerProtocol), and wrap each
// provider in its attempt filters (attemptChain). On error it closes what
// it made.
func (a *Application) providerDirectory(ref *reference, s refSpec) (cluster.Directory, error) {
	params := consumerTimeouts(s.rc)
	params[protocol.KeyRemoteApplication] = a.cfg.Application.Name
	clientTLS := a.tls.forReference(s.key)
	proto := consumerProtocol{Protocol: s.proto, params: params, key: s.key, log: a.log.Named("directory"),
		tls: clientTLS, anyTLS: clientTLS != nil || a.defaultClientTLS()}
	wrap := func(inv protocol.Invoker) protocol.Invoker { return a.attemptChain(s, inv) }
	if s.rc.URL != "" {
		for _, addr := range strings.Split(s.rc.URL, ",") {
			u, err := directURL(strings.TrimSpace(addr), s.rc)
			if err == nil {
				var inv protocol.Invoker
				if inv, err = proto.refer(u, true); err == nil {
					ref.direct = append(ref.direct, wrap(inv))
				}
			}
			if err != nil {
				ref.closeDirect()
				return nil, fmt.Errorf("config: %s.url: %w", s.key, err)
			}
		}
		return cluster.NewStatic(ref.direct...), nil
	}
	d, err := registry.NewDirectory(registry.DirectoryOptions{
		Consumer:          ref.consumer,
		Protocol:          proto,
		Wrap:              wrap,
		NoEmptyProtection: s.rc.EmptyProtection != nil && !*s.rc.EmptyProtection,
		Logger:            a.log.Named("directory"),
	})
	if err != nil {
		return nil, fmt.Errorf("config: refer %s: %w", s.id, err)
	}
	ref.dir = d
	return d, nil
}

// attemptChain wraps one provider's invoker in what every attempt on it
// passes, in order: the monitor's attempt counting, the provider's token,
// WithFilters' attempt filters, then the reference's named ones.
func (a *Application) attemptChain(s refSpec, inv protocol.Invoker) protocol.Invoker {
	var fs []protocol.Filter
	if s.counted {
		fs = append(fs, a.monitor.AttemptFilter(inv.URL().Address()))
	}
	if tok := inv.URL().Param(protocol.KeyToken, ""); tok != "" {
		fs = append(fs, filter.NewTokenAttach(tok))
	}
	fs = append(fs, a.filters.attempt...)
	fs = append(fs, a.byName(s.rc.AttemptFilters)...)
	return protocol.Chain(inv, fs...)
}

// clusterInvokers joins dir into one cluster invoker per load balancer
// the reference uses (its own, and those its methods name; they share
// the per-provider statistics), kept in ref.clusters, and returns the
// invoker that sends each method's calls to the cluster of its balancer:
// the reference's own cluster invoker when every method uses it.
func (a *Application) clusterInvokers(ref *reference, s refSpec, dir cluster.Directory, routers []cluster.Router) (protocol.Invoker, error) {
	opts, err := a.clusterOptions(s, ref.consumer, routers)
	if err != nil {
		return nil, err
	}
	if ref.dir != nil {
		opts.NoProvider = a.explainNoProvider(ref, s)
	}
	byBalancer := map[string]*cluster.Invoker{}
	forBalancer := func(lb string) (*cluster.Invoker, error) {
		if c, ok := byBalancer[lb]; ok {
			return c, nil
		}
		o := opts
		o.LoadBalance = lb
		c, err := cluster.New(dir, o)
		if err != nil {
			return nil, err
		}
		byBalancer[lb] = c
		ref.clusters = append(ref.clusters, c)
		return c, nil
	}
	top, err := forBalancer(s.rc.LoadBalance)
	if err != nil {
		return nil, fmt.Errorf("config: refer %s: %w", s.id, err)
	}
	mi := &methodInvoker{def: top, url: ref.consumer, methods: map[string]methodOptions{}}
	for m, mc := range s.rc.Methods {
		if mc.LoadBalance == "" {
			continue // the reference's own
		}
		c, err := forBalancer(mc.LoadBalance)
		if err != nil {
			return nil, fmt.Errorf("config: refer %s method %s: %w", s.id, m, err)
		}
		if c != top {
			mi.methods[m] = methodOptions{invoker: c}
		}
	}
	if len(mi.methods) == 0 {
		// One frame less for every call (and in every waiting call's
		// stack): the cluster invoker's URL is the reference's too.
		return top, nil
	}
	return mi, nil
}

// clusterOptions are the settings every cluster invoker of the reference
// shares (all but the load balancer): strategy, retries, forking and
// failback settings, balancer options, one statistics table, routers.
func (a *Application) clusterOptions(s refSpec, consumer *protocol.URL, routers []cluster.Router) (cluster.Options, error) {
	rc := s.rc
	bopts, err := loadbalance.OptionsFromURL(consumer)
	if err != nil {
		return cluster.Options{}, fmt.Errorf("config: references.%s.hash: %w", s.id, err)
	}
	// In-flight calls and latency per provider, shared by every balancer.
	bopts = append(bopts, loadbalance.WithStats(loadbalance.NewStats(nil)))
	methodRetries := map[string]int{}
	for m, mc := range rc.Methods {
		if mc.Retries != nil {
			methodRetries[m] = *mc.Retries
		}
	}
	return cluster.Options{
		Strategy:        rc.Cluster,
		Strategies:      a.strategies,
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
	}, nil
}

// subscribe has the reference's directory follow its registries' provider
// lists, and its cluster invokers their routing rules (applied after the
// configured routers), and registers the consumer in each registry, as
// Dubbo's consumers do. A failed consumer registration does not stop
// calls, and a registry that does not answer now gets it in the
// background.
func (a *Application) subscribe(ctx context.Context, ref *reference, s refSpec, routers []cluster.Router) error {
	ref.listener = &routerListener{Directory: ref.dir, clusters: ref.clusters, fixed: routers, consumer: ref.consumer, log: a.log}
	for _, r := range s.regs {
		if err := r.Subscribe(ref.consumer, ref.listener); err != nil {
			return fmt.Errorf("config: refer %s: subscribe: %w", s.id, err)
		}
		ref.subs = append(ref.subs, r)
		rctx := ctx
		if hr, ok := r.(registry.HealthReporter); ok && !hr.Health(nil).Connected {
			var cancel context.CancelFunc
			rctx, cancel = context.WithCancel(ctx)
			cancel()
		}
		if err := r.Register(rctx, ref.consumer); err != nil {
			a.log.Warn("register consumer", zap.String("reference", s.id), zap.Error(err))
		}
	}
	return nil
}

// awaitProviders waits for the first provider list (from the registry,
// or from the cache when the registry is unreachable), at most the
// longest timeout of the reference's registries, so that the first call
// does not fail for want of a list that is on its way. With
// ReferenceConfig.Check, no list or an empty one is an error naming what
// each registry holds; without, it is a warning.
func (a *Application) awaitProviders(ctx context.Context, ref *reference, s refSpec) error {
	wait := a.referWait(s.rc.Registries)
	wctx, cancel := context.WithTimeout(ctx, wait)
	err := ref.dir.WaitReady(wctx)
	cancel()
	service := ref.consumer.ServiceKey()
	if err != nil {
		err = fmt.Errorf("%w %s: no provider list within %v (%w)", cluster.ErrNoProvider, service, wait, err)
	}
	if !s.rc.Check {
		if err != nil {
			a.log.Warn("no provider list yet (registry unreachable and nothing cached?); calls fail until one arrives",
				zap.String("reference", s.id), zap.String("service", service),
				zap.String("registries", a.describeRegistries(a.registryIDs(s.rc.Registries), ref.subs, ref.consumer)), zap.Error(err))
		}
		return nil
	}
	if err == nil && len(ref.dir.Snapshot().Invokers()) == 0 {
		err = fmt.Errorf("%w %s", cluster.ErrNoProvider, service)
	}
	if err == nil {
		err = refusedReason(ref.dir.Snapshot().Invokers()) // all refused for TLS (tls.go)
	}
	if err != nil {
		ids := a.registryIDs(s.rc.Registries)
		asked := a.describeRegistries(ids, ref.subs, ref.consumer)
		if errors.Is(err, context.DeadlineExceeded) && !anyConnected(ref.subs) {
			// No list in time and no registry answering: the registry
			// is the trouble, not the providers.
			err = fmt.Errorf("config: refer %s: check: %w: %w; asked %s", s.id, ErrRegistryUnreachable, err, asked)
		} else {
			err = fmt.Errorf("config: refer %s: check: %w; asked %s", s.id, err, asked)
		}
		return adviseNoProvider(err, s, ids, ref.subs, ref.consumer)
	}
	return nil
}

// callChain is the reference's top invoker: what runs once per call,
// above the cluster and whether or not a provider is reached, in order:
// the monitor's call counting, WithFilters' call filters, the
// reference's named ones, then methods (the cluster invokers explain
// "no provider" errors by what the registries hold: explainNoProvider).
func (a *Application) callChain(s refSpec, methods protocol.Invoker) protocol.Invoker {
	var calls []protocol.Filter
	if s.counted {
		calls = append(calls, a.monitor.CallFilter())
	}
	calls = append(calls, a.filters.call...)
	calls = append(calls, a.byName(s.rc.CallFilters)...)
	return protocol.Chain(methods, calls...)
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

// checkDirectURLs checks a url setting (providers called without a
// registry, comma-separated) as Refer will read it, so that a mistake is
// said by New, before anything runs.
func checkDirectURLs(urls string) error {
	if urls == "" {
		return nil
	}
	for addr := range strings.SplitSeq(urls, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			return fmt.Errorf("%q has an empty entry: write host:port[,host:port...], such as 127.0.0.1:20880", urls)
		}
		if _, err := directURL(addr, ReferenceConfig{}); err != nil {
			return err
		}
	}
	return nil
}

func directURL(s string, rc ReferenceConfig) (*protocol.URL, error) {
	given := s
	if !strings.Contains(s, "://") {
		s = DefaultProtocol + "://" + s
	}
	u, err := protocol.ParseURL(s)
	if err != nil {
		return nil, err
	}
	if u.Path == "" {
		u.Path = rc.Interface
	}
	if u.Port == 0 {
		return nil, fmt.Errorf("%q names no port: write host:port, such as 127.0.0.1:20880", given)
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

	mu      sync.Mutex
	applied []string // the rules in force, as URL strings (none at first)
}

// NotifyRouters replaces the routers with the configured ones followed by
// urls' rules, unless those are the rules already in force: a registry
// tells its rules again (at subscription, after a reconnection) and
// replacing the routers makes every call's subset be computed anew.
func (l *routerListener) NotifyRouters(urls []*protocol.URL) {
	rules := make([]string, len(urls))
	for i, u := range urls {
		rules[i] = u.String()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Equal(rules, l.applied) {
		return
	}
	rs, err := cluster.RoutersFromURLs(urls, l.consumer)
	if err != nil {
		l.log.Warn("bad routing rule in registry; keeping the previous rules", zap.Error(err))
		return
	}
	all := append(append([]cluster.Router{}, l.fixed...), rs...)
	for _, c := range l.clusters {
		c.SetRouters(all)
	}
	l.applied = rules
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
