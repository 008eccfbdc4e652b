package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/internal/named"
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
	Failback  = "failback"
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

// Options configure a cluster invoker. The zero value means defaults.
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
	// provider: 0 means DefaultRetries (2, so 3 attempts), a negative value
	// means none. A call's "retries" attachment overrides it.
	Retries int
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
	// Now is the clock for call statistics (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.Strategy == "" {
		o.Strategy = DefaultStrategy
	}
	if o.Strategies == nil {
		o.Strategies = Builtin()
	}
	if o.Balancers == nil {
		o.Balancers = loadbalance.Builtin()
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Forks == 0 {
		o.Forks = DefaultForks
	}
	if o.Forks < 0 {
		return o, fmt.Errorf("cluster: forks %d: must be positive", o.Forks)
	}
	if o.FailbackRetries == 0 {
		o.FailbackRetries = DefaultFailbackRetries
	}
	if o.FailbackQueue == 0 {
		o.FailbackQueue = DefaultFailbackQueue
	}
	if o.FailbackRetries < 0 || o.FailbackQueue < 0 || o.FailbackBackoff < 0 || o.FailbackTimeout < 0 {
		return o, errors.New("cluster: failback options must not be negative")
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
		o.Now = time.Now
	}
	return o, nil
}

// Strategy is a fault-tolerance strategy: it runs one call against the
// cluster, deciding which providers to try and what a failure means. It
// uses the cluster invoker's List, Select and Call. Safe for concurrent
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
		Failover:  func(Options) (Strategy, error) { return StrategyFunc(failover), nil },
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
// each call lists the providers, lets the routers narrow them, drops those
// whose connection is down, and lets the strategy pick with the load
// balancer and handle failures. Every call to a provider is counted in
// Stats (calls in flight, response times) for the balancers that read them.
//
// Safe for concurrent use. Close stops the strategy's background work; the
// directory belongs to whoever created it.
type Invoker struct {
	dir      Directory
	url      *protocol.URL
	lb       loadbalance.LoadBalance
	stats    *loadbalance.Stats
	strategy Strategy
	routers  atomic.Pointer[[]Router]
	avail    atomic.Pointer[availCache]
	log      *zap.Logger
	now      func() time.Time
	retries  int
	forks    int
	name     string
	closed   atomic.Bool
	once     sync.Once
	closeErr error
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
	c := &Invoker{dir: dir, url: o.URL, log: o.Logger, now: o.Now, retries: o.Retries, forks: o.Forks, name: o.Strategy}
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
	if c.url == nil {
		c.url = protocol.NewURL("consumer", "", 0, "", nil)
	}
	c.SetRouters(o.Routers)
	return c, nil
}

// URL implements protocol.Invoker: the consumer URL from Options.
func (c *Invoker) URL() *protocol.URL { return c.url }

// Invoke implements protocol.Invoker by running the strategy.
func (c *Invoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	return c.strategy.Invoke(ctx, c, inv)
}

// Available reports whether any listed provider is available.
func (c *Invoker) Available() bool {
	l, err := c.dir.List(nil)
	if err != nil {
		return false
	}
	for _, p := range l {
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
// category changes. Calls in progress finish with the old ones.
func (c *Invoker) SetRouters(rs []Router) {
	rs = slices.Clone(rs)
	c.routers.Store(&rs)
}

// Stats returns the per-provider statistics the invoker records.
func (c *Invoker) Stats() *loadbalance.Stats { return c.stats }

// Balancer returns the load balancer.
func (c *Invoker) Balancer() loadbalance.LoadBalance { return c.lb }

// Logger returns the logger.
func (c *Invoker) Logger() *zap.Logger { return c.log }

// Retries returns how many times a failed call may be retried: the call's
// "retries" attachment when it is a number, else the configured value.
func (c *Invoker) Retries(inv *protocol.Invocation) int {
	if v := inv.Attachment(protocol.KeyRetries); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return c.retries
}

// Forks returns how many providers forking calls at once.
func (c *Invoker) Forks() int { return c.forks }

// List returns the providers that may take inv: the directory's list,
// narrowed by the routers, without those whose connection is down. When
// none is left it returns an error wrapping ErrNoProvider that names the
// service.
func (c *Invoker) List(inv *protocol.Invocation) ([]protocol.Invoker, error) {
	l, err := c.dir.List(inv)
	if err != nil {
		return nil, fmt.Errorf("cluster: list %s: %w", serviceOf(inv), err)
	}
	listed := len(l)
	for _, r := range *c.routers.Load() {
		if len(l) == 0 {
			break
		}
		if l, err = r.Route(l, inv); err != nil {
			return nil, fmt.Errorf("cluster: route %s: %w", serviceOf(inv), err)
		}
	}
	routed := len(l)
	l = c.available(l)
	if len(l) == 0 {
		return nil, noProvider(inv, listed, routed)
	}
	return l, nil
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

// availCache remembers the filtered list for the last input slice and
// pattern of unavailable providers, so a steady state keeps returning the
// same slice (and the balancers' caches stay warm).
type availCache struct {
	in   []protocol.Invoker
	down []int
	out  []protocol.Invoker
}

func (c *Invoker) available(l []protocol.Invoker) []protocol.Invoker {
	var buf [16]int
	down := buf[:0]
	for i, p := range l {
		if !protocol.IsAvailable(p) {
			down = append(down, i)
		}
	}
	if len(down) == 0 {
		return l
	}
	if cached := c.avail.Load(); cached != nil && sameSlice(cached.in, l) && slices.Equal(cached.down, down) {
		return cached.out
	}
	out := make([]protocol.Invoker, 0, len(l)-len(down))
	j := 0
	for i, p := range l {
		if j < len(down) && down[j] == i {
			j++
			continue
		}
		out = append(out, p)
	}
	c.avail.Store(&availCache{in: l, down: slices.Clone(down), out: out})
	return out
}

// Select picks a provider from invokers with the load balancer, avoiding
// those in tried when another is left (compared by URL identity).
func (c *Invoker) Select(invokers []protocol.Invoker, inv *protocol.Invocation, tried []protocol.Invoker) (protocol.Invoker, error) {
	p, err := c.lb.Select(invokers, inv)
	if err != nil {
		return nil, fmt.Errorf("cluster: select for %s: %w", serviceOf(inv), err)
	}
	if len(tried) == 0 || !containsURL(tried, p) {
		return p, nil
	}
	rest := make([]protocol.Invoker, 0, len(invokers))
	for _, q := range invokers {
		if !containsURL(tried, q) {
			rest = append(rest, q)
		}
	}
	if len(rest) == 0 {
		return p, nil // every provider was tried: any will do
	}
	if p, err = c.lb.Select(rest, inv); err != nil {
		return nil, fmt.Errorf("cluster: select for %s: %w", serviceOf(inv), err)
	}
	return p, nil
}

func containsURL(l []protocol.Invoker, p protocol.Invoker) bool {
	u := p.URL()
	for _, q := range l {
		if q.URL() == u {
			return true
		}
	}
	return false
}

// Call invokes p, counting the call in Stats (in flight while it runs,
// then its response time). Strategies make every provider call through it.
func (c *Invoker) Call(ctx context.Context, p protocol.Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	st := c.stats.For(p)
	start := c.now()
	st.Begin(start)
	res, err := p.Invoke(ctx, inv)
	end := c.now()
	st.End(end, end.Sub(start), err != nil)
	return res, err
}

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
