package loadbalance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/protocol"
)

// Names of the built-in load balancers.
const (
	Random           = "random"
	RoundRobin       = "roundrobin"
	LeastActive      = "leastactive"
	ConsistentHash   = "consistenthash"
	ShortestResponse = "shortestresponse"
	P2C              = "p2c"
)

// Default is the name of the default load balancer.
const Default = Random

// ErrNoInvokers is returned by Pick when the list is empty or every
// provider in it is excluded.
var ErrNoInvokers = errors.New("loadbalance: no invokers to select from")

// LoadBalance is a load-balancing algorithm. It derives a Picker from a
// provider list once, and the Picker serves every call to that list, as
// grpc-go's balancer builds a picker once per state change.
//
// The cluster invoker calls Build once per provider list it routes calls
// to (one per directory snapshot and route); the list is immutable and
// must not be modified. State that outlives one list (round-robin
// positions, call statistics) belongs to the LoadBalance and is keyed by
// provider identity, so a new list does not reset it. Build must be safe
// for concurrent use.
type LoadBalance interface {
	Build(invokers []protocol.Invoker) Picker
}

// Picker picks one provider of the list it was built from.
//
// Pick returns the index in that list of the provider for inv, never one
// for which ex.Excluded is true (ex may be nil: nothing is excluded), or
// ErrNoInvokers when no provider is left. The cluster invoker calls it
// once per attempt. Pick must be safe for concurrent use, must not block,
// and should not allocate.
type Picker interface {
	Pick(inv *protocol.Invocation, ex Exclude) (int, error)
}

// Exclude tells a Picker which providers of its list a call must not go
// to: those already tried by this call, and those whose connection is
// down. The cluster invoker implements it and is the one place that
// decides availability; pickers only ask. Excluded is cheap and safe to
// call many times per pick.
type Exclude interface {
	Excluded(i int) bool
}

// Select picks one provider of invokers for inv with lb. It builds a
// picker every time, so it suits tools and one-off picks; callers picking
// from the same list many times build the Picker once and keep it.
func Select(lb LoadBalance, invokers []protocol.Invoker, inv *protocol.Invocation) (protocol.Invoker, error) {
	i, err := lb.Build(invokers).Pick(inv, nil)
	if err != nil {
		return nil, err
	}
	return invokers[i], nil
}

// excluded reports whether ex excludes i; a nil ex excludes nothing.
func excluded(ex Exclude, i int) bool { return ex != nil && ex.Excluded(i) }

// StatsUser is implemented by balancers that read call statistics
// (leastactive, shortestresponse, p2c). The cluster invoker records every
// call it makes in the returned Stats; a balancer that does not implement it
// gets no statistics.
type StatsUser interface {
	Stats() *Stats
}

// Options configure a balancer when a Table builds it. As in every layer's
// options: every zero field means the default (DefaultOptions shows them);
// a negative field is invalid (Validate), and Table.New refuses it.
type Options struct {
	// Now is the clock used for warm-up and statistics; nil means time.Now.
	Now func() time.Time
	// Seed, when non-zero, makes the random choices repeatable: the
	// balancer uses its own generator seeded with it (behind a mutex).
	// Zero uses the runtime's lock-free generator.
	Seed uint64
	// Stats holds the per-provider statistics that leastactive,
	// shortestresponse and p2c read. Nil gives the balancer its own; the
	// cluster invoker passes the Stats it records calls in.
	Stats *Stats
	// VirtualNodes is the number of ring points per provider for
	// consistenthash (default DefaultVirtualNodes, 160; rounded up to a
	// multiple of 4).
	VirtualNodes int
	// HashArguments are the indexes of the call arguments whose values
	// form the consistenthash key (default [0]). Indexes out of range are
	// ignored.
	HashArguments []int
	// HashAttachment, when set, names an invocation attachment whose value
	// is the consistenthash key when present (for example the caller's
	// address, which gives client-address hashing); the arguments are
	// used when it is absent.
	HashAttachment string
	// ProbeAfter is how long a provider may go without any finished call
	// before shortestresponse forgets its response time and p2c probes it
	// again (default DefaultProbeAfter, 5s).
	ProbeAfter time.Duration
}

func (o Options) now() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return time.Now
}

// DefaultProbeAfter is the default of Options.ProbeAfter.
const DefaultProbeAfter = 5 * time.Second

// DefaultOptions returns the defaults of every field (Now nil: time.Now;
// Seed 0: the runtime's generator; Stats nil: the balancer's own).
func DefaultOptions() Options {
	return Options{VirtualNodes: DefaultVirtualNodes, HashArguments: []int{0}, ProbeAfter: DefaultProbeAfter}
}

// Validate returns an error naming the first negative field.
func (o Options) Validate() error {
	if err := optcheck.NonNegative("loadbalance",
		optcheck.Field{Name: "VirtualNodes", Value: int64(o.VirtualNodes), Default: DefaultVirtualNodes},
		optcheck.Field{Name: "ProbeAfter", Value: int64(o.ProbeAfter), Default: DefaultProbeAfter},
	); err != nil {
		return err
	}
	for _, i := range o.HashArguments {
		if i < 0 {
			return fmt.Errorf("loadbalance: HashArguments index %d is negative (want argument indexes from 0)", i)
		}
	}
	return nil
}

func (o Options) probeAfter() time.Duration {
	if o.ProbeAfter > 0 {
		return o.ProbeAfter
	}
	return DefaultProbeAfter
}

// Option sets a field of Options.
type Option func(*Options)

// WithNow sets the clock.
func WithNow(now func() time.Time) Option { return func(o *Options) { o.Now = now } }

// WithSeed makes random choices repeatable.
func WithSeed(seed uint64) Option { return func(o *Options) { o.Seed = seed } }

// WithStats sets the statistics a balancer reads.
func WithStats(s *Stats) Option { return func(o *Options) { o.Stats = s } }

// WithVirtualNodes sets the ring points per provider of consistenthash.
func WithVirtualNodes(n int) Option { return func(o *Options) { o.VirtualNodes = n } }

// WithHashArguments sets the argument indexes of the consistenthash key.
func WithHashArguments(idx ...int) Option {
	return func(o *Options) { o.HashArguments = slices.Clone(idx) }
}

// WithHashAttachment makes consistenthash key on an attachment when the
// call carries it (for example the caller's address).
func WithHashAttachment(key string) Option { return func(o *Options) { o.HashAttachment = key } }

// WithProbeAfter sets Options.ProbeAfter.
func WithProbeAfter(d time.Duration) Option { return func(o *Options) { o.ProbeAfter = d } }

// URL parameters read by OptionsFromURL, as Dubbo names them.
const (
	KeyHashNodes      = "hash.nodes"
	KeyHashArguments  = "hash.arguments"
	KeyHashAttachment = "hash.attachment"
)

// OptionsFromURL reads the balancer settings a reference URL may carry:
// hash.nodes (an integer), hash.arguments (comma-separated indexes) and
// hash.attachment. An error names the key and value that are wrong.
func OptionsFromURL(u *protocol.URL) ([]Option, error) {
	var opts []Option
	if n, err := u.IntParam(KeyHashNodes, 0); err != nil {
		return nil, fmt.Errorf("loadbalance: %w", err)
	} else if n < 0 {
		return nil, fmt.Errorf("loadbalance: url parameter %s=%d must not be negative", KeyHashNodes, n)
	} else if n > 0 {
		opts = append(opts, WithVirtualNodes(int(n)))
	}
	if v := u.Param(KeyHashArguments, ""); v != "" {
		var idx []int
		for part := range strings.SplitSeq(v, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || i < 0 {
				return nil, fmt.Errorf("loadbalance: url parameter %s=%q: want comma-separated argument indexes", KeyHashArguments, v)
			}
			idx = append(idx, i)
		}
		opts = append(opts, WithHashArguments(idx...))
	}
	if v := u.Param(KeyHashAttachment, ""); v != "" {
		opts = append(opts, WithHashAttachment(v))
	}
	return opts, nil
}

// Factory builds a new, independent balancer. Each cluster invoker owns
// its balancer, so state such as round-robin positions is never shared
// between services.
type Factory func(o Options) LoadBalance

// Table maps names to factories. Safe for concurrent use.
type Table struct{ t *named.Table[Factory] }

// Builtin returns a new Table holding random, roundrobin, leastactive,
// consistenthash, shortestresponse and p2c.
func Builtin() *Table {
	return &Table{named.New("loadbalance", "", map[string]Factory{
		Random:           func(o Options) LoadBalance { return NewRandom(o) },
		RoundRobin:       func(o Options) LoadBalance { return NewRoundRobin(o) },
		LeastActive:      func(o Options) LoadBalance { return NewLeastActive(o) },
		ConsistentHash:   func(o Options) LoadBalance { return NewConsistentHash(o) },
		ShortestResponse: func(o Options) LoadBalance { return NewShortestResponse(o) },
		P2C:              func(o Options) LoadBalance { return NewP2C(o) },
	})}
}

// Register adds f under name. It returns an error if name is empty, f is
// nil or the name is taken.
func (t *Table) Register(name string, f Factory) error {
	if f == nil {
		return fmt.Errorf("loadbalance: register %q: nil factory", name)
	}
	return t.t.Register(name, f)
}

// New returns a new balancer built by the factory registered under name;
// "" means Default. An unknown name is an error that lists Names(); so are
// invalid options (see Options.Validate).
func (t *Table) New(name string, opts ...Option) (LoadBalance, error) {
	if name == "" {
		name = Default
	}
	f, err := t.t.Get(name)
	if err != nil {
		return nil, err
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lb := f(o)
	if lb == nil {
		return nil, fmt.Errorf("loadbalance: factory %q returned nil", name)
	}
	return lb, nil
}

// Names returns the registered names, sorted.
func (t *Table) Names() []string { return t.t.Names() }

// randSource draws random numbers: from the runtime's lock-free generator,
// or from a seeded generator behind a mutex.
type randSource struct {
	mu *sync.Mutex
	r  *rand.Rand
}

func newRandSource(seed uint64) randSource {
	if seed == 0 {
		return randSource{}
	}
	return randSource{mu: new(sync.Mutex), r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s randSource) intN(n int) int {
	if s.r == nil {
		return rand.IntN(n)
	}
	s.mu.Lock()
	v := s.r.IntN(n)
	s.mu.Unlock()
	return v
}

func (s randSource) int64N(n int64) int64 {
	if s.r == nil {
		return rand.Int64N(n)
	}
	s.mu.Lock()
	v := s.r.Int64N(n)
	s.mu.Unlock()
	return v
}
