package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// Errors returned by cluster invokers.
var (
	// ErrNoProvider is wrapped by the error of a call for which no provider
	// is listed, left after routing, or available; the message names the
	// service.
	ErrNoProvider = errors.New("cluster: no provider")
	// ErrClosed is returned by calls on a closed cluster invoker.
	ErrClosed = errors.New("cluster: invoker closed")
)

// Names of the built-in fault-tolerance strategies.
const (
	Failover  = "failover"
	Failfast  = "failfast"
	Failsafe  = "failsafe"
	Failback  = "failback" // retries in the background with a deep copy of the arguments
	Forking   = "forking"
	Broadcast = "broadcast"
)

// Defaults of Options.
const (
	DefaultStrategy        = Failover
	DefaultRetries         = 2
	DefaultForks           = 2
	DefaultFailbackRetries = 3
	DefaultFailbackQueue   = 100
	DefaultFailbackBackoff = 5 * time.Second
)

// Options configure a cluster invoker. As in every layer's options: every
// zero field means the default (DefaultOptions shows them) and a negative
// field is invalid (Validate), with one exception: Retries (and
// MethodRetries) count extra attempts, so their zero is literal, no
// retries, as retries: 0 is in config; start from DefaultOptions for
// DefaultRetries.
type Options struct {
	// Strategy names the fault-tolerance strategy (default failover).
	Strategy string
	// Strategies is the table Strategy is looked up in (default Builtin()).
	Strategies *Table
	// LoadBalance names the load balancer (default random).
	LoadBalance string
	// Balancers is the table LoadBalance is looked up in (default
	// loadbalance.Builtin()).
	Balancers *loadbalance.Table
	// Balancer, when set, is used instead of looking LoadBalance up. If
	// it implements loadbalance.StatsUser, calls are recorded in its Stats.
	Balancer loadbalance.LoadBalance
	// BalancerOptions are passed to the load balancer's factory.
	BalancerOptions []loadbalance.Option
	// Retries is how many times failover retries a failed call on another
	// provider: 0 means none, DefaultOptions sets DefaultRetries (2, so 3
	// attempts). Negative is an error, as in config.
	Retries int
	// MethodRetries overrides Retries per method name. Settings stay in the
	// consumer: nothing a call carries (no attachment) changes them.
	MethodRetries map[string]int
	// Forks is how many providers forking calls at once (default 2).
	Forks int
	// Routers narrow the provider list, in order, on every call.
	Routers []Router
	// Logger receives failsafe and failback reports (default zap.NewNop()).
	Logger *zap.Logger
	// URL is returned by the invoker's URL method: the reference's URL.
	// proxy.Refer reads the interface, version and group of the calls it
	// builds from it, so set it when a stub is made over the invoker. Nil
	// gives an empty consumer:// URL.
	URL *protocol.URL
	// FailbackRetries is how many times failback retries a failed call in
	// the background (default 3).
	FailbackRetries int
	// FailbackQueue bounds the calls waiting for a failback retry (default
	// 100); a failure that finds the queue full is returned to the caller.
	FailbackQueue int
	// FailbackBackoff is the delay before the first failback retry
	// (default 5s); it doubles for each further retry.
	FailbackBackoff time.Duration
	// FailbackTimeout bounds each failback retry (default
	// protocol.DefaultTimeout).
	FailbackTimeout time.Duration
	// Now is the clock for call statistics and the balancer's warm-up
	// weights. The default reads the monotonic clock alone and estimates
	// the wall time from it (exact unless the wall clock is set while the
	// process runs): on a virtual machine it costs half of time.Now.
	Now func() time.Time
	// NoProvider, when set, rewrites the error of a call that ends with
	// no provider to go to (an error wrapping ErrNoProvider) before
	// Invoke returns it; config adds what the registries list. Other
	// errors do not reach it.
	NoProvider func(err error) error
}

// DefaultOptions returns the options of a failover cluster over the random
// balancer with DefaultRetries, DefaultForks and the failback defaults.
func DefaultOptions() Options {
	return Options{
		Strategy:        DefaultStrategy,
		LoadBalance:     loadbalance.Default,
		Retries:         DefaultRetries,
		Forks:           DefaultForks,
		FailbackRetries: DefaultFailbackRetries,
		FailbackQueue:   DefaultFailbackQueue,
		FailbackBackoff: DefaultFailbackBackoff,
		FailbackTimeout: protocol.DefaultTimeout,
	}
}

// Validate returns an error naming the first invalid field: a negative
// count or duration.
func (o Options) Validate() error {
	if o.Retries < 0 {
		return fmt.Errorf("cluster: Retries %d is negative (want 0 for no retries, or more; DefaultOptions has %d)", o.Retries, DefaultRetries)
	}
	for _, m := range slices.Sorted(maps.Keys(o.MethodRetries)) {
		if n := o.MethodRetries[m]; n < 0 {
			return fmt.Errorf("cluster: MethodRetries[%q] %d is negative (want 0 for no retries, or more)", m, n)
		}
	}
	return optcheck.NonNegative("cluster",
		optcheck.Field{Name: "Forks", Value: int64(o.Forks), Default: DefaultForks},
		optcheck.Field{Name: "FailbackRetries", Value: int64(o.FailbackRetries), Default: DefaultFailbackRetries},
		optcheck.Field{Name: "FailbackQueue", Value: int64(o.FailbackQueue), Default: DefaultFailbackQueue},
		optcheck.Field{Name: "FailbackBackoff", Value: int64(o.FailbackBackoff), Default: DefaultFailbackBackoff},
		optcheck.Field{Name: "FailbackTimeout", Value: int64(o.FailbackTimeout), Default: protocol.DefaultTimeout},
	)
}

func (o Options) withDefaults() (Options, error) {
	if err := o.Validate(); err != nil {
		return o, err
	}
	if o.Strategy == "" {
		o.Strategy = DefaultStrategy
	}
	if o.Strategies == nil {
		o.Strategies = Builtin()
	}
	if o.Balancers == nil {
		o.Balancers = loadbalance.Builtin()
	}
	if o.Forks == 0 {
		o.Forks = DefaultForks
	}
	if o.FailbackRetries == 0 {
		o.FailbackRetries = DefaultFailbackRetries
	}
	if o.FailbackQueue == 0 {
		o.FailbackQueue = DefaultFailbackQueue
	}
	if o.FailbackBackoff == 0 {
		o.FailbackBackoff = DefaultFailbackBackoff
	}
	if o.FailbackTimeout == 0 {
		o.FailbackTimeout = protocol.DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = monoNow
	}
	return o, nil
}

// Strategy is a fault-tolerance strategy: it runs one call against the
// cluster, deciding which providers to try and what a failure means. It
// uses the cluster invoker's Pick (or Providers) and Call. Safe for concurrent
// use. A strategy that runs goroutines implements io.Closer; the cluster
// invoker's Close calls it.
type Strategy interface {
	Invoke(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error)
}

// StrategyFunc adapts a function to a stateless Strategy.
type StrategyFunc func(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error)

// Invoke implements Strategy.
func (f StrategyFunc) Invoke(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	return f(ctx, c, inv)
}

// StrategyFactory builds a strategy for one cluster invoker, from its
// resolved options.
type StrategyFactory func(o Options) (Strategy, error)

// Table maps strategy names to factories. Safe for concurrent use.
type Table struct{ t *named.Table[StrategyFactory] }

// Builtin returns a new Table holding failover, failfast, failsafe,
// failback, forking and broadcast.
func Builtin() *Table {
	return &Table{named.New("cluster", "strategy", map[string]StrategyFactory{
		Failover:  func(Options) (Strategy, error) { return failoverStrategy{}, nil },
		Failfast:  func(Options) (Strategy, error) { return StrategyFunc(failfast), nil },
		Failsafe:  func(Options) (Strategy, error) { return StrategyFunc(failsafe), nil },
		Failback:  func(o Options) (Strategy, error) { return newFailback(o), nil },
		Forking:   func(Options) (Strategy, error) { return &forking{}, nil },
		Broadcast: func(Options) (Strategy, error) { return StrategyFunc(broadcast), nil },
	})}
}

// Register adds f under name. It returns an error if name is empty, f is
// nil or the name is taken.
func (t *Table) Register(name string, f StrategyFactory) error {
	if f == nil {
		return fmt.Errorf("cluster: register strategy %q: nil factory", name)
	}
	return t.t.Register(name, f)
}

// New builds the strategy registered under name ("" means failover) for a
// cluster invoker with options o. An unknown name is an error that lists
// Names().
func (t *Table) New(name string, o Options) (Strategy, error) {
	if name == "" {
		name = DefaultStrategy
	}
	f, err := t.t.Get(name)
	if err != nil {
		return nil, err
	}
	s, err := f(o)
	if err != nil {
		return nil, fmt.Errorf("cluster: strategy %q: %w", name, err)
	}
	if s == nil {
		return nil, fmt.Errorf("cluster: strategy %q: factory returned nil", name)
	}
	return s, nil
}

// Names returns the registered names, sorted.
func (t *Table) Names() []string { return t.t.Names() }

// Invoker joins the providers of a Directory into one protocol.Invoker:
// each call takes the directory's current snapshot, lets the routers
// narrow it, and lets the strategy pick with the load balancer and handle
// failures. Every call to a provider is counted in Stats (calls in flight,
// response times) for the balancers that read them.
//
// The invoker derives its state once per (snapshot, route): the routers'
// subsets and the load balancer's Picker for each subset. A pick is then
// one call on that state, without allocating, whatever mix of routes and
// retries the calls take. The invoker is the one place that decides
// availability: a provider whose connection is down (protocol.IsAvailable)
// is not picked, and a call with none left fails with ErrNoProvider.
//
// Safe for concurrent use. Close stops the strategy's background work; the
// directory belongs to whoever created it.
type Invoker struct {
	dir           Directory
	url           *protocol.URL
	lb            loadbalance.LoadBalance
	stats         *loadbalance.Stats
	strategy      Strategy
	failover      bool         // strategy is the built-in failover, called directly (inlined)
	run           StrategyFunc // strategy, when it is a StrategyFunc: called without the method's frame
	noProvider    func(error) error
	routing       atomic.Pointer[routing]
	state         atomic.Pointer[state]
	mu            sync.Mutex // serializes building a new state
	log           *zap.Logger
	now           func() time.Time
	realClock     bool // now is time.Now (Options.Now was nil)
	retries       int
	methodRetries map[string]int
	forks         int
	name          string
	closed        atomic.Bool
	once          sync.Once
	closeErr      error
}

var (
	_ protocol.Invoker   = (*Invoker)(nil)
	_ protocol.Available = (*Invoker)(nil)
	_ io.Closer          = (*Invoker)(nil)
)

// New returns a cluster invoker over dir. Names are resolved now, so a
// typo in a strategy or balancer name fails here, listing the known names.
func New(dir Directory, opts Options) (*Invoker, error) {
	if dir == nil {
		return nil, errors.New("cluster: nil directory")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Invoker{dir: dir, url: o.URL, log: o.Logger, now: o.Now, realClock: opts.Now == nil, retries: o.Retries, methodRetries: maps.Clone(o.MethodRetries), forks: o.Forks, name: o.Strategy, noProvider: o.NoProvider}
	c.lb = o.Balancer
	if c.lb == nil {
		// Fresh statistics unless BalancerOptions bring shared ones (several
		// cluster invokers over one directory should share them).
		bopts := append([]loadbalance.Option{loadbalance.WithNow(o.Now), loadbalance.WithStats(loadbalance.NewStats(o.Now))}, o.BalancerOptions...)
		if c.lb, err = o.Balancers.New(o.LoadBalance, bopts...); err != nil {
			return nil, err
		}
	}
	if su, ok := c.lb.(loadbalance.StatsUser); ok && su.Stats() != nil {
		c.stats = su.Stats()
	} else {
		c.stats = loadbalance.NewStats(o.Now)
	}
	if c.strategy, err = o.Strategies.New(o.Strategy, o); err != nil {
		return nil, err
	}
	_, c.failover = c.strategy.(failoverStrategy)
	c.run, _ = c.strategy.(StrategyFunc)
	if c.url == nil {
		c.url = protocol.NewURL("consumer", "", 0, "", nil)
	}
	c.SetRouters(o.Routers)
	return c, nil
}

// URL implements protocol.Invoker: the consumer URL from Options.
func (c *Invoker) URL() *protocol.URL { return c.url }

// Invoke implements protocol.Invoker by running the strategy.
//
// The built-in failover's first attempt runs here, with Call's counting,
// so that a call waiting for its provider keeps one frame of the cluster
// on its stack, not three (Invoke, failover, Call); the retries run in
// failoverRetry.
func (c *Invoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if !c.failover {
		return c.invokeStrategy(ctx, inv)
	}
	if err := ctx.Err(); err != nil {
		return nil, c.explain(failoverStopped(inv, nil, err))
	}
	p, err := c.pick(inv, nil)
	if err != nil {
		return nil, c.explain(err)
	}
	st, start := c.begin(p)
	res, err := p.Invoke(ctx, inv)
	c.end(st, start, err)
	if err == nil {
		return res, nil
	}
	res, err = failoverRetry(ctx, c, inv, p, err)
	return res, c.explain(err)
}

// invokeStrategy runs a strategy other than the built-in failover.
func (c *Invoker) invokeStrategy(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	var (
		res *protocol.Result
		err error
	)
	if c.run != nil {
		res, err = c.run(ctx, c, inv)
	} else {
		res, err = c.strategy.Invoke(ctx, c, inv)
	}
	return res, c.explain(err)
}

// explain passes an error wrapping ErrNoProvider to Options.NoProvider,
// when set; it returns other errors (and nil) as they are.
func (c *Invoker) explain(err error) error {
	if err != nil && c.noProvider != nil && errors.Is(err, ErrNoProvider) {
		return c.noProvider(err)
	}
	return err
}

// Available reports whether any listed provider is available.
func (c *Invoker) Available() bool {
	for _, p := range c.dir.Snapshot().Invokers() {
		if protocol.IsAvailable(p) {
			return true
		}
	}
	return false
}

// Close stops the strategy's background work (failback retries, forking
// calls still running) and waits for it. It is idempotent.
func (c *Invoker) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		if cl, ok := c.strategy.(io.Closer); ok {
			c.closeErr = cl.Close()
		}
	})
	return c.closeErr
}

// SetRouters replaces the routers, for example when the registry's routers
// category changes. Calls in progress finish with the old ones; the next
// call derives new subsets.
func (c *Invoker) SetRouters(rs []Router) {
	c.routing.Store(&routing{routers: slices.Clone(rs)})
}

// Stats returns the per-provider statistics the invoker records.
func (c *Invoker) Stats() *loadbalance.Stats { return c.stats }

// Retries returns how many times a failed call of inv's method may be
// retried: Options.MethodRetries for the method, else Options.Retries.
func (c *Invoker) Retries(inv *protocol.Invocation) int {
	if n, ok := c.methodRetries[inv.Method]; ok {
		return n
	}
	return c.retries
}

// Forks returns how many providers forking calls at once.
func (c *Invoker) Forks() int { return c.forks }

// maxTried is how many providers a Tried remembers.
const maxTried = 8

// Tried is the providers one call has tried, so that its next attempt
// goes elsewhere. The zero value is empty; it remembers the last eight,
// compared by URL identity. Strategies keep it on their stack: it is a
// value, and passing it to Pick does not allocate.
type Tried struct {
	n    int
	urls [maxTried]*protocol.URL
}

// Add records p as tried.
func (t *Tried) Add(p protocol.Invoker) {
	t.urls[t.n%maxTried] = p.URL()
	t.n++
}

// Len returns the number of providers added.
func (t *Tried) Len() int { return t.n }

// Has reports whether p was added (among the last eight).
func (t *Tried) Has(p protocol.Invoker) bool { return t.has(p.URL()) }

func (t *Tried) has(u *protocol.URL) bool {
	for i := range min(t.n, maxTried) {
		if t.urls[i] == u {
			return true
		}
	}
	return false
}

// Pick chooses the provider for one attempt of inv: one the routers allow
// and whose connection is up, not one in tried unless every such provider
// was tried (then any of them will do). When none is left it returns an
// error wrapping ErrNoProvider that names the service and says why.
//
// Pick does not allocate while the snapshot and routers stay the same.
func (c *Invoker) Pick(inv *protocol.Invocation, tried Tried) (protocol.Invoker, error) {
	return c.pick(inv, &tried)
}

// pick is Pick with tried by reference, nil for none: a first attempt
// passes no Tried by value (nine words on its caller's stack).
func (c *Invoker) pick(inv *protocol.Invocation, tried *Tried) (protocol.Invoker, error) {
	st := c.current()
	r := st.route(inv)
	if r.err != nil {
		return nil, fmt.Errorf("cluster: route %s: %w", serviceOf(inv), r.err)
	}
	if len(r.invokers) == 0 {
		return nil, noProvider(inv, len(st.snap.Invokers()), 0)
	}
	pk := r.picker(c.lb)
	var (
		i   int
		err error
	)
	if tried == nil || tried.n == 0 {
		// A first attempt excludes only what is down: the route's list
		// itself says so, with nothing to fill or give back.
		i, err = pk.Pick(inv, (*availability)(&r.invokers))
	} else {
		ex := excluders.Get().(*excluder)
		ex.invokers, ex.tried, ex.skipTried = r.invokers, *tried, true
		i, err = pk.Pick(inv, ex)
		if err != nil && errors.Is(err, loadbalance.ErrNoInvokers) {
			ex.skipTried = false // every available provider was tried
			i, err = pk.Pick(inv, ex)
		}
		ex.invokers, ex.tried = nil, Tried{}
		excluders.Put(ex)
	}
	switch {
	case errors.Is(err, loadbalance.ErrNoInvokers):
		return nil, noProvider(inv, len(st.snap.Invokers()), len(r.invokers))
	case err != nil:
		return nil, fmt.Errorf("cluster: select for %s: %w", serviceOf(inv), err)
	case i < 0 || i >= len(r.invokers):
		return nil, fmt.Errorf("cluster: select for %s: load balancer picked %d of %d providers", serviceOf(inv), i, len(r.invokers))
	}
	return r.invokers[i], nil
}

// Providers returns every provider inv may go to now: routed and
// available, for strategies that call them all (broadcast). When none is
// left it returns an error wrapping ErrNoProvider.
func (c *Invoker) Providers(inv *protocol.Invocation) ([]protocol.Invoker, error) {
	st := c.current()
	r := st.route(inv)
	if r.err != nil {
		return nil, fmt.Errorf("cluster: route %s: %w", serviceOf(inv), r.err)
	}
	out := r.invokers
	for i, p := range r.invokers {
		if !protocol.IsAvailable(p) {
			out = slices.Clone(r.invokers[:i])
			for _, q := range r.invokers[i+1:] {
				if protocol.IsAvailable(q) {
					out = append(out, q)
				}
			}
			break
		}
	}
	if len(out) == 0 {
		return nil, noProvider(inv, len(st.snap.Invokers()), len(r.invokers))
	}
	return out, nil
}

func noProvider(inv *protocol.Invocation, listed, routed int) error {
	switch {
	case listed == 0:
		return fmt.Errorf("%w for service %s (method %s)", ErrNoProvider, serviceOf(inv), inv.Method)
	case routed == 0:
		return fmt.Errorf("%w for service %s (method %s): routers left none of %d providers", ErrNoProvider, serviceOf(inv), inv.Method, listed)
	default:
		return fmt.Errorf("%w for service %s (method %s): none of %d providers is available", ErrNoProvider, serviceOf(inv), inv.Method, routed)
	}
}

func serviceOf(inv *protocol.Invocation) string {
	return protocol.ServiceKey(inv.Service, inv.Version, inv.Group)
}

// excluder is the invoker's answer to a picker's Excluded: providers
// whose connection is down, and those the call tried (unless every
// available one was). Pooled, so that a pick does not allocate.
type excluder struct {
	invokers  []protocol.Invoker
	tried     Tried
	skipTried bool
}

var excluders = sync.Pool{New: func() any { return new(excluder) }}

// availability is the excluder of a first attempt: a provider is
// excluded when its connection is down.
type availability []protocol.Invoker

// Excluded implements loadbalance.Exclude.
func (a *availability) Excluded(i int) bool { return !protocol.IsAvailable((*a)[i]) }

// Excluded implements loadbalance.Exclude.
func (e *excluder) Excluded(i int) bool {
	p := e.invokers[i]
	return !protocol.IsAvailable(p) || (e.skipTried && e.tried.has(p.URL()))
}

// routing is the routers in force; SetRouters replaces it as a whole.
type routing struct{ routers []Router }

// state is what the invoker derived from one snapshot and one routing:
// the tree of routes, filled as calls need them.
type state struct {
	snap *Snapshot
	rt   *routing
	root *route
}

// current returns the state of the directory's current snapshot and the
// current routers, building it (once) when either changed.
func (c *Invoker) current() *state {
	snap, rt := c.dir.Snapshot(), c.routing.Load()
	if st := c.state.Load(); st != nil && st.snap == snap && st.rt == rt {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.state.Load(); st != nil && st.snap == snap && st.rt == rt {
		return st
	}
	st := &state{snap: snap, rt: rt, root: &route{invokers: snap.Invokers(), cell: new(pickCell)}}
	c.state.Store(st)
	return st
}

// maxRoutes bounds the subsets kept per route and router (keys come from
// attachments, which the caller controls); beyond it subsets are derived
// per call.
const maxRoutes = 64

// route is one subset of a snapshot: what the first routers leave for the
// calls with the same keys. Its children are keyed by the next router's
// key.
type route struct {
	invokers []protocol.Invoker
	err      error
	cell     *pickCell // shared with the parent when a router kept every provider
	key      RouteKey  // the key the parent keeps this route under
	mu       sync.Mutex
	next     atomic.Pointer[map[RouteKey]*route]
	// last is the child the latest call found in next: calls mostly
	// repeat the key (no tag, the same method), and comparing it costs
	// less than hashing it for the map.
	last atomic.Pointer[route]
}

// pickCell holds the Picker of one subset, built on first use.
type pickCell struct {
	once   sync.Once
	picker loadbalance.Picker
}

// route walks the routers for inv down from the root.
func (st *state) route(inv *protocol.Invocation) *route {
	r := st.root
	for _, rt := range st.rt.routers {
		if r.err != nil || len(r.invokers) == 0 {
			break
		}
		r = r.child(rt, rt.Key(inv))
	}
	return r
}

func (r *route) child(rt Router, key RouteKey) *route {
	if c := r.last.Load(); c != nil && c.key == key {
		return c
	}
	if m := r.next.Load(); m != nil {
		if c, ok := (*m)[key]; ok {
			r.last.Store(c)
			return c
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.next.Load()
	if old != nil {
		if c, ok := (*old)[key]; ok {
			return c
		}
	}
	out, err := rt.Narrow(r.invokers, key)
	c := &route{invokers: out, err: err, cell: new(pickCell), key: key}
	if err == nil && len(out) == len(r.invokers) {
		c.invokers, c.cell = r.invokers, r.cell // nothing narrowed: share the picker
	}
	if old != nil && len(*old) >= maxRoutes {
		return c
	}
	m := make(map[RouteKey]*route, 1)
	if old != nil {
		m = maps.Clone(*old)
	}
	m[key] = c
	r.next.Store(&m)
	return c
}

// picker returns the route's Picker, building it with lb on first use.
func (r *route) picker(lb loadbalance.LoadBalance) loadbalance.Picker {
	r.cell.once.Do(func() { r.cell.picker = lb.Build(r.invokers) })
	return r.cell.picker
}

// Call invokes p, counting the call in Stats (in flight while it runs,
// then its response time). Strategies make every provider call through it.
func (c *Invoker) Call(ctx context.Context, p protocol.Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	st, start := c.begin(p)
	res, err := p.Invoke(ctx, inv)
	c.end(st, start, err)
	return res, err
}

// begin counts a call to p as started, and returns its statistics and
// its start for end.
func (c *Invoker) begin(p protocol.Invoker) (*loadbalance.Stat, time.Time) {
	st := c.stats.For(p)
	start := c.now()
	st.Begin(start)
	return st, start
}

// end counts a call begun at start as ended, failed when err is not nil.
func (c *Invoker) end(st *loadbalance.Stat, start time.Time, err error) {
	var took time.Duration
	if c.realClock {
		// The monotonic clock alone, as for the start: half the cost of
		// time.Now on a virtual machine, and the end's wall time is the
		// start's plus what it measures.
		took = time.Since(start)
	} else {
		took = c.now().Sub(start)
	}
	st.End(start.Add(took), took, err != nil)
}

// epoch is the clock reading monoNow counts from.
var epoch = time.Now()

// monoNow returns the current time from the monotonic clock alone: its
// monotonic reading is exact and its wall time is estimated from it
// (exact unless the wall clock was set since the process started). On a
// virtual machine it costs about half of time.Now, which reads both
// clocks. It is the default Options.Now: the statistics and the
// balancers use the wall time only in whole milliseconds (when a
// provider was last used, how far its warm-up is).
func monoNow() time.Time { return epoch.Add(time.Since(epoch)) }

// isBusiness reports whether err is a business error from the service.
func isBusiness(err error) bool {
	var e *service.Error
	return errors.As(err, &e)
}

// wrap adds the strategy, call and provider to err, leaving business
// errors as the service returned them.
func wrap(strategy string, inv *protocol.Invocation, p protocol.Invoker, err error) error {
	if isBusiness(err) {
		return err
	}
	return fmt.Errorf("cluster: %s %s.%s on %s: %w", strategy, serviceOf(inv), inv.Method, p.URL().Address(), err)
}
