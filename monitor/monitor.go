package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// Side tells which end of a call a filter counts.
type Side string

// The two sides of a call.
const (
	Consumer Side = "consumer"
	Provider Side = "provider"
)

// Stat is a snapshot of the counts of one key since the monitor started:
// one method of one service on one side, with one peer. The counters are
// read one by one while calls go on, so Calls may be ahead of
// Successes+Failures+Concurrent by the calls that started meanwhile.
type Stat struct {
	Side                            Side
	Service, Version, Group, Method string
	// Provider and Consumer are the peers, as in Row: on the consumer side
	// Provider is "" for the call-level counts (above the cluster) and the
	// provider's address for the attempts sent to it.
	Provider, Consumer string
	// Calls is the number of calls started; Successes and Failures count
	// the calls that ended without and with an error (a business error is
	// a failure too).
	Calls, Successes, Failures int64
	// FailuresByKind splits Failures by kind (KindBusiness, ...); nil when
	// there are none.
	FailuresByKind map[string]int64
	// BytesIn and BytesOut are the body bytes received and sent, as far as
	// the protocol told them.
	BytesIn, BytesOut int64
	// Elapsed is the total time of the ended calls; MaxElapsed the longest.
	Elapsed, MaxElapsed time.Duration
	// Concurrent is the number of calls in flight at the snapshot;
	// MaxConcurrent the most there have been at once.
	Concurrent, MaxConcurrent int64
}

// AvgElapsed returns the mean time of the ended calls, or 0.
func (s Stat) AvgElapsed() time.Duration {
	n := s.Successes + s.Failures
	if n == 0 {
		return 0
	}
	return s.Elapsed / time.Duration(n)
}

// String formats the stat on one line.
func (s Stat) String() string {
	peer := ""
	switch {
	case s.Side == Consumer && s.Provider != "":
		peer = " -> " + s.Provider
	case s.Side == Provider && s.Consumer != "":
		peer = " <- " + s.Consumer
	}
	return fmt.Sprintf("%s %s.%s%s calls=%d ok=%d fail=%d avg=%v max=%v concurrent=%d/%d",
		s.Side, protocol.ServiceKey(s.Service, s.Version, s.Group), s.Method, peer,
		s.Calls, s.Successes, s.Failures, s.AvgElapsed(), s.MaxElapsed, s.Concurrent, s.MaxConcurrent)
}

// key identifies what a row counts. Everything in it is a value the call
// already has, so a lookup allocates nothing.
type key struct {
	side                            Side
	service, version, group, method string
	// provider: the provider's address on the consumer side ("" for the
	// call level), this provider's address on the provider side.
	provider string
	// consumerApp and consumerIP: the calling consumer, provider side only.
	consumerApp string
	consumerIP  netip.Addr
}

// The failure kinds in counter order.
var kinds = [...]string{KindBusiness, KindTimeout, KindNoProvider, KindConnection, KindBusy, KindOther}

func kindIndex(kind string) int {
	for i, k := range kinds {
		if k == kind {
			return i
		}
	}
	return len(kinds) - 1
}

// counters are the live counts of one key, updated atomically. The
// counters only grow (the reporter remembers what it sent); the max fields
// and the histogram restart at every report.
type counters struct {
	calls, successes    atomic.Int64
	failures            [len(kinds)]atomic.Int64
	bytesIn, bytesOut   atomic.Int64
	elapsed, maxElapsed atomic.Int64 // nanoseconds
	concurrent, maxConc atomic.Int64

	// allMaxElapsed and allMaxConc keep the maxima of earlier intervals
	// for Snapshot.
	allMaxElapsed, allMaxConc atomic.Int64

	hist *latency // microseconds, this interval

	sent sent // what the reporter has sent, under Monitor.reportMu
	k    key  // the key these counters count, for the filters' caches
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// Classifier tells the failure kind of a call's error (KindBusiness, ...)
// on one side.
type Classifier func(side Side, err error) string

// Classify is the default Classifier. It knows the errors of this
// framework's lower layers: a *service.Error is a business error; the
// exchange layer's errors are timeouts, connection failures or "busy"; on
// the provider side any other error returned by the service is a business
// error, on the consumer side it is "other". Layers above the monitor
// (the cluster's "no provider") are mapped by the classifier config adds.
func Classify(side Side, err error) string {
	switch {
	case hasType[*service.Error](err, 0):
		return KindBusiness
	case errors.Is(err, status.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, status.ErrServerBusy):
		return KindBusy
	case errors.Is(err, status.ErrDial), errors.Is(err, status.ErrClosed),
		errors.Is(err, status.ErrConnLost), errors.Is(err, status.ErrReadOnly):
		return KindConnection
	case side == Provider && !isStatus(err):
		return KindBusiness
	}
	return KindOther
}

// isStatus reports whether err is one of the exchange layer's answers.
func isStatus(err error) bool {
	return hasType[*status.Error](err, 0) || errors.Is(err, status.ErrServiceNotFound) ||
		errors.Is(err, status.ErrBadRequest) || errors.Is(err, status.ErrServerError) ||
		errors.Is(err, status.ErrBadResponse) || errors.Is(err, status.ErrPayloadTooLarge) ||
		errors.Is(err, context.Canceled)
}

// hasType reports whether err's tree holds an error of type T, like
// errors.As but without making its target escape (so without allocating).
func hasType[T error](err error, depth int) bool {
	for ; err != nil && depth < 64; depth++ {
		if _, ok := err.(T); ok {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if hasType[T](e, depth+1) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// Option configures a Monitor.
type Option func(*Monitor)

// WithIdentity names the process in rows and reports: its application
// name and host (its address, host or host:port).
func WithIdentity(application, host string) Option {
	return func(m *Monitor) {
		m.app, m.host = application, host
	}
}

// WithClassifier replaces Classify.
func WithClassifier(c Classifier) Option {
	return func(m *Monitor) {
		if c != nil {
			m.classify = c
		}
	}
}

// Monitor counts calls per side, service, method and peer, told by the
// counting filters of protocol/filter (CallFilter and AttemptFilter on the
// consumer side, a filter.Count with a ProviderRecorder on the provider
// side), which may be put in any number of chains. A counted call
// costs a few atomic operations and a lookup in an immutable map, takes no
// lock, and allocates nothing once its key has been seen (but for a chunk
// of the latency histogram the first time a call's time falls in a new
// power-of-two range). A Monitor is safe for concurrent use.
type Monitor struct {
	app, host string
	classify  Classifier

	mu      sync.Mutex // serializes writers of entries
	entries atomic.Pointer[map[key]*counters]
	now     func() int64 // monotonic nanoseconds, for call times
	wall    func() time.Time

	reportMu  sync.Mutex // serializes takeReport
	lastTaken time.Time
}

// New returns a Monitor with no counts.
func New(opts ...Option) *Monitor {
	m := &Monitor{now: nanotime, wall: time.Now, classify: Classify}
	for _, o := range opts {
		o(m)
	}
	empty := map[key]*counters{}
	m.entries.Store(&empty)
	m.lastTaken = m.wall()
	return m
}

// Application returns the application name and host given WithIdentity.
func (m *Monitor) Application() (name, host string) { return m.app, m.host }

// Filter returns a filter that counts every call passing through it as a
// call on side: on the consumer side the call-level counts (CallFilter),
// on the provider side those of ProviderRecorder with no address of its
// own.
func (m *Monitor) Filter(side Side) protocol.Filter {
	if side == Provider {
		return filter.NewCount(m.ProviderRecorder())
	}
	return m.CallFilter()
}

// CallFilter returns the consumer-side counting filter (a filter.Count)
// that counts the calls the application makes, once per call: it goes
// above the cluster, so a call that reaches no provider (no provider,
// routing, cancelled before sending) is counted as a failed call. Its rows
// have Provider "".
func (m *Monitor) CallFilter() protocol.Filter {
	return filter.NewCount(&recorder{m: m, side: Consumer})
}

// AttemptFilter returns the consumer-side counting filter (a
// filter.Count) for the invoker of the provider at address provider
// (host:port): it goes below the cluster and counts every attempt sent to
// that provider.
func (m *Monitor) AttemptFilter(provider string) protocol.Filter {
	return filter.NewCount(&recorder{m: m, side: Consumer, provider: provider})
}

// ProviderRecorder returns the provider-side recorder of an exported
// service, for a filter.Count in front of it: it counts calls per calling
// consumer (the remote.application attachment and the address the
// protocol gives) and, as a protocol.ResponseObserver, the bytes of the
// responses. SetAddr tells it the provider's own address once it is known.
func (m *Monitor) ProviderRecorder() *ProviderRecorder {
	return &ProviderRecorder{recorder{m: m, side: Provider}}
}

// ProviderRecorder is the provider side's filter.Recorder; see
// Monitor.ProviderRecorder.
type ProviderRecorder struct{ r recorder }

var (
	_ filter.Recorder           = (*ProviderRecorder)(nil)
	_ protocol.ResponseObserver = (*ProviderRecorder)(nil)
)

// SetAddr sets the provider's address (host:port) its rows carry.
func (p *ProviderRecorder) SetAddr(addr string) { p.r.addr.Store(&addr) }

// Begin implements filter.Recorder.
func (p *ProviderRecorder) Begin(inv *protocol.Invocation) filter.Mark { return p.r.Begin(inv) }

// End implements filter.Recorder.
func (p *ProviderRecorder) End(inv *protocol.Invocation, mk filter.Mark, res *protocol.Result, err error) {
	p.r.End(inv, mk, res, err)
}

// ResponseSent counts the bytes of the response to inv.
func (p *ProviderRecorder) ResponseSent(inv *protocol.Invocation, bytes int) {
	k := p.r.key(inv)
	p.r.lookup(&k).bytesOut.Add(int64(bytes))
}

// recorder counts the calls of one filter.Count: one side, and on the
// consumer side one provider or the call level.
type recorder struct {
	m        *Monitor
	side     Side
	provider string                 // consumer side; "" at call level
	addr     atomic.Pointer[string] // provider side
	// cache holds recently used counters by a cheap hash of the key, so
	// that most calls compare a key instead of hashing it for the map.
	cache [cacheSlots]atomic.Pointer[counters]
}

const cacheSlots = 16

// slot picks a cache slot from the lengths and a few bytes of the key's
// strings: cheap, and different for the methods and peers one filter sees.
func slot(k *key) int {
	h := uint(len(k.service))*7 + uint(len(k.version))*3 + uint(len(k.group))*5 + uint(len(k.method))*11
	if n := len(k.method); n > 0 {
		h += uint(k.method[0]) + uint(k.method[n-1])*13 + uint(k.method[n/2])*17
	}
	if k.side == Provider {
		h += uint(len(k.consumerApp))*19 + uint(len(k.provider))*23
		if k.consumerIP.Is4() {
			b := k.consumerIP.As4()
			h += uint(b[3])*29 + uint(b[2])*31
		}
	}
	return int(h % cacheSlots)
}

// lookup returns the counters of k through the cache.
func (f *recorder) lookup(k *key) *counters {
	s := &f.cache[slot(k)]
	if c := s.Load(); c != nil && c.k == *k {
		return c
	}
	c := f.m.counters(*k)
	s.Store(c)
	return c
}

var _ filter.Recorder = (*recorder)(nil)

func (f *recorder) key(inv *protocol.Invocation) key {
	k := key{side: f.side, service: inv.Service, version: inv.Version, group: inv.Group, method: inv.Method, provider: f.provider}
	if f.side == Provider {
		if a := f.addr.Load(); a != nil {
			k.provider = *a
		}
		k.consumerApp = inv.Attachments[protocol.KeyRemoteApplication]
		k.consumerIP = ipOf(inv.RemoteAddr)
	}
	return k
}

// ipOf returns the IP of a TCP address without allocating.
func ipOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok && t != nil {
		return t.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Begin counts the start of a call.
func (f *recorder) Begin(inv *protocol.Invocation) filter.Mark {
	k := f.key(inv)
	c := f.lookup(&k)
	c.calls.Add(1)
	storeMax(&c.maxConc, c.concurrent.Add(1))
	if f.side == Provider {
		c.bytesIn.Add(int64(inv.RequestBytes))
	}
	return filter.Mark{Ref: c, Start: f.m.now()}
}

// End counts the end of a call: a failure of the kind of err (a panic is
// KindOther), or a success with its bytes.
func (f *recorder) End(_ *protocol.Invocation, mk filter.Mark, res *protocol.Result, err error) {
	c, _ := mk.Ref.(*counters)
	if c == nil {
		return
	}
	d := time.Duration(f.m.now() - mk.Start)
	switch {
	case errors.Is(err, filter.ErrPanicked):
		c.end(d, kindIndex(KindOther), false)
	case err != nil:
		c.end(d, kindIndex(f.m.classify(f.side, err)), false)
	default:
		if f.side == Consumer && res != nil {
			c.bytesOut.Add(int64(res.RequestBytes))
			c.bytesIn.Add(int64(res.ResponseBytes))
		}
		c.end(d, 0, true)
	}
}

func (c *counters) end(d time.Duration, kind int, ok bool) {
	if ok {
		c.successes.Add(1)
	} else {
		c.failures[kind].Add(1)
	}
	c.elapsed.Add(int64(d))
	storeMax(&c.maxElapsed, int64(d))
	c.hist.record(int64(d / time.Microsecond))
	c.concurrent.Add(-1)
}

// MaxKeys bounds the keys (rows) a Monitor keeps. On the provider side a
// key holds the calling consumer's application name and address, which
// the consumer chooses: past MaxKeys, the calls of consumers not seen yet
// are counted under OtherConsumers and no address, so that strangers
// cannot grow the monitor without bound, nor its reports past what the
// monitor service stores (10000 rows).
const MaxKeys = 8192

// maxKeys is MaxKeys, a variable for the tests.
var maxKeys = MaxKeys

// OtherConsumers is the application name of the provider-side rows that
// count the consumers past MaxKeys; InvalidConsumer names a consumer
// whose application name is longer than maxAppLen bytes or not UTF-8
// (the monitor service stores names of at most 1024 bytes of UTF-8).
const (
	OtherConsumers  = "(other consumers)"
	InvalidConsumer = "(invalid name)"
)

// maxAppLen bounds a calling consumer's application name in a row.
const maxAppLen = 256

// consumerApp is the name a provider-side row gives the calling
// application app.
func consumerApp(app string) string {
	if len(app) > maxAppLen || !utf8.ValidString(app) {
		return InvalidConsumer
	}
	return app
}

// counters returns the counters of k, adding them on first use by copying
// the map (new keys are rare; lookups take no lock). Past maxKeys a new
// provider-side key counts under OtherConsumers.
func (m *Monitor) counters(k key) *counters {
	if c, ok := (*m.entries.Load())[k]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.entries.Load()
	if c, ok := old[k]; ok {
		return c
	}
	// A provider-side key's consumer comes from the caller: checked
	// here, once per new key, not on every call (a call with a bad name
	// misses the map and comes here each time).
	if k.side == Provider && k.consumerApp != consumerApp(k.consumerApp) {
		k.consumerApp = InvalidConsumer
		if c, ok := old[k]; ok {
			return c
		}
	}
	if len(old) >= maxKeys && k.side == Provider {
		k.consumerApp, k.consumerIP = OtherConsumers, netip.Addr{}
		if c, ok := old[k]; ok {
			return c
		}
	}
	next := make(map[key]*counters, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	c := &counters{hist: newLatency(), k: k}
	next[k] = c
	m.entries.Store(&next)
	return c
}

// consumerName formats "application@host".
func consumerName(app string, host string) string {
	if app == "" && host == "" {
		return ""
	}
	return app + "@" + host
}

// peers returns the Provider and Consumer of k's rows.
func (m *Monitor) peers(k key) (provider, consumer string) {
	if k.side == Consumer {
		return k.provider, consumerName(m.app, m.host)
	}
	ip := ""
	if k.consumerIP.IsValid() {
		ip = k.consumerIP.String()
	}
	return k.provider, consumerName(k.consumerApp, ip)
}

// Snapshot returns the counts of every key seen so far, since the monitor
// started, sorted by service, version, group, method, side, provider and
// consumer.
func (m *Monitor) Snapshot() []Stat {
	entries := *m.entries.Load()
	out := make([]Stat, 0, len(entries))
	for k, c := range entries {
		s := Stat{
			Side: k.side, Service: k.service, Version: k.version, Group: k.group, Method: k.method,
			Calls: c.calls.Load(), Successes: c.successes.Load(),
			BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(),
			Elapsed:    time.Duration(c.elapsed.Load()),
			MaxElapsed: time.Duration(max(c.maxElapsed.Load(), c.allMaxElapsed.Load())),
			Concurrent: c.concurrent.Load(), MaxConcurrent: max(c.maxConc.Load(), c.allMaxConc.Load()),
		}
		s.Provider, s.Consumer = m.peers(k)
		for i := range kinds {
			if n := c.failures[i].Load(); n != 0 {
				if s.FailuresByKind == nil {
					s.FailuresByKind = map[string]int64{}
				}
				s.FailuresByKind[kinds[i]] = n
				s.Failures += n
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Stat) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Side, b.Side),
			cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Consumer, b.Consumer))
	})
	return out
}

// sent is what the reporter has already put in reports for one key.
type sent struct {
	calls, successes  int64
	failures          [len(kinds)]int64
	bytesIn, bytesOut int64
	elapsed           int64
}

// TakeReport returns what was counted since the last TakeReport (or since
// New): one row per key with anything new, each count exactly once across
// reports. The interval's maxima and histograms restart. Seq and Dropped
// are left for the caller (the Reporter) to fill.
func (m *Monitor) TakeReport() *Report {
	m.reportMu.Lock()
	defer m.reportMu.Unlock()
	now := m.wall()
	r := &Report{Application: m.app, Host: m.host, Start: m.lastTaken, End: now}
	m.lastTaken = now
	for k, c := range *m.entries.Load() {
		row := Row{Side: k.side, Application: m.app, Service: k.service, Version: k.version, Group: k.group, Method: k.method}
		row.Provider, row.Consumer = m.peers(k)
		s := &c.sent
		take := func(v *atomic.Int64, last *int64) int64 {
			cur := v.Load()
			d := cur - *last
			*last = cur
			return d
		}
		row.Calls = take(&c.calls, &s.calls)
		row.Successes = take(&c.successes, &s.successes)
		for i := range kinds {
			if n := take(&c.failures[i], &s.failures[i]); n != 0 {
				if row.FailuresByKind == nil {
					row.FailuresByKind = map[string]int64{}
				}
				row.FailuresByKind[kinds[i]] = n
				row.Failures += n
			}
		}
		row.BytesIn = take(&c.bytesIn, &s.bytesIn)
		row.BytesOut = take(&c.bytesOut, &s.bytesOut)
		row.ElapsedNanos = take(&c.elapsed, &s.elapsed)
		row.Concurrent = c.concurrent.Load()
		// Restart the maxima: at least what is in flight now.
		row.MaxNanos = c.maxElapsed.Swap(0)
		storeMax(&c.allMaxElapsed, row.MaxNanos)
		row.MaxConcurrent = c.maxConc.Swap(row.Concurrent)
		storeMax(&c.allMaxConc, row.MaxConcurrent)
		row.Latency = c.hist.take()
		// A call's end is counted in several steps (its outcome, its
		// time, its histogram sample, its place in flight): a report taken
		// between them leaves the later steps to the next one, so a row
		// with only those is reported too, or they would be lost.
		if row.Calls == 0 && row.Successes == 0 && row.Failures == 0 && row.BytesIn == 0 && row.BytesOut == 0 &&
			row.Concurrent == 0 && row.ElapsedNanos == 0 && row.MaxNanos == 0 && len(row.Latency.Count) == 0 {
			continue
		}
		r.Rows = append(r.Rows, row)
	}
	slices.SortFunc(r.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Side, b.Side),
			cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Consumer, b.Consumer))
	})
	return r
}
