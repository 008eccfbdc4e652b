package loadbalance

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// RecyclePeriod is how long per-provider and per-method state may go
// unused before it is recycled.
const RecyclePeriod = time.Minute

// ewmaAlpha is the weight of the newest sample in a latency EWMA.
const ewmaAlpha = 0.3

// Stats holds call statistics per provider, keyed by the provider identity
// (protocol, address and service key), so they survive a directory that
// re-lists the same providers as new invokers. The cluster invoker calls
// For(invoker).Begin() before each call and End after it; balancers read
// them. Safe for concurrent use; entries of providers not used for
// RecyclePeriod are recycled.
type Stats struct {
	now    func() time.Time
	cache  sync.Map // *protocol.URL -> *Stat, a cache of byKey
	gen    atomic.Uint64
	nextID atomic.Uint32
	log    changeLog

	mu        sync.Mutex
	byKey     map[string]*Stat
	lastSweep time.Time
}

// NewStats returns empty statistics using clock now (nil means time.Now).
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	return &Stats{now: now, byKey: map[string]*Stat{}, lastSweep: now()}
}

// For returns the statistics of the provider behind inv.
func (s *Stats) For(inv protocol.Invoker) *Stat { return s.forURL(inv.URL()) }

// Len returns the number of providers with statistics.
func (s *Stats) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

func (s *Stats) forURL(u *protocol.URL) *Stat {
	if v, ok := s.cache.Load(u); ok {
		return v.(*Stat)
	}
	key := identity(u)
	now := s.now()
	s.mu.Lock()
	if now.Sub(s.lastSweep) >= RecyclePeriod {
		s.sweepLocked(now)
	}
	st, ok := s.byKey[key]
	if !ok {
		st = &Stat{id: s.nextID.Add(1), log: &s.log}
		st.used.Store(now.UnixMilli())
		s.byKey[key] = st
	}
	s.mu.Unlock()
	s.cache.Store(u, st)
	return st
}

// sweepLocked drops idle entries and clears the pointer cache, so both
// stay bounded by the providers used in the last RecyclePeriod. Balancers
// notice the new generation and look their statistics up again.
func (s *Stats) sweepLocked(now time.Time) {
	s.lastSweep = now
	cutoff := now.Add(-RecyclePeriod).UnixMilli()
	removed := false
	for k, st := range s.byKey {
		if st.active.Load() == 0 && st.used.Load() < cutoff {
			delete(s.byKey, k)
			removed = true
		}
	}
	s.cache.Clear()
	if removed {
		s.gen.Add(1)
	}
}

// Stat is the statistics of one provider. All methods are safe for
// concurrent use and lock-free.
type Stat struct {
	active    atomic.Int64
	total     atomic.Uint64
	failed    atomic.Uint64
	ewma      atomic.Uint64 // float64 bits, nanoseconds; 0 = no sample
	lastEnd   atomic.Int64  // unix ms of the last finished call
	used      atomic.Int64  // unix ms of the last Begin
	lastProbe atomic.Int64  // unix ms of the last forced probe (p2c)

	id  uint32     // in its Stats, for the change log
	log *changeLog // nil for a Stat made outside a Stats
}

// logSize is the number of changes a changeLog remembers: a picker that
// has missed more rescans everything.
const logSize = 1024

// changeLog tells pickers which providers' counts changed since they last
// looked, so that they rescan only those (see leastActiveIndex). A change
// takes the next sequence number and writes it, with the Stat's id, into
// its slot of a ring; a reader that finds a slot not holding the sequence
// number it expects (overwritten, or not yet written) treats every
// provider as changed. Writers take no lock. Nothing is written until a
// reader first looks (on): a reader's first look treats every provider
// as changed, so it misses nothing, and the calls of a cluster whose
// balancer reads no log (random, round robin, or fewer than indexMin
// providers) do not all write one shared counter.
type changeLog struct {
	on   atomic.Bool
	seq  atomic.Uint64
	ring [logSize]atomic.Uint64 // low 32 bits of the sequence number << 32 | Stat id
}

// read turns the log on, for a reader about to look at it, and reports
// whether it was off: changes made until now were not written, so the
// reader must treat every provider as changed. A change made after read
// returns is written.
func (l *changeLog) read() (wasOff bool) {
	if l.on.Load() {
		return false
	}
	l.on.Store(true)
	return true
}

// changed records a change of st's counts, after it is made.
func (st *Stat) changed() {
	if l := st.log; l != nil && l.on.Load() {
		n := l.seq.Add(1)
		l.ring[n%logSize].Store(n<<32 | uint64(st.id))
	}
}

// Begin records the start of a call at time now.
func (st *Stat) Begin(now time.Time) {
	st.active.Add(1)
	st.changed()
	if ms := now.UnixMilli(); st.used.Load() != ms {
		st.used.Store(ms)
	}
}

// End records the end of a call begun with Begin, that took elapsed and
// failed when failed is true. Every finished call, failed or not, feeds
// the response-time average: a timeout is a slow answer.
func (st *Stat) End(now time.Time, elapsed time.Duration, failed bool) {
	st.active.Add(-1)
	st.total.Add(1)
	if failed {
		st.failed.Add(1)
	}
	st.observe(elapsed)
	if ms := now.UnixMilli(); st.lastEnd.Load() != ms {
		st.lastEnd.Store(ms)
	}
	st.changed()
}

// Observe feeds one response time into the moving average without
// counting a call.
func (st *Stat) Observe(elapsed time.Duration) {
	st.observe(elapsed)
	st.changed()
}

func (st *Stat) observe(elapsed time.Duration) {
	x := float64(max(elapsed, 1))
	for {
		old := st.ewma.Load()
		var v float64
		if old == 0 {
			v = x
		} else {
			f := math.Float64frombits(old)
			v = f + ewmaAlpha*(x-f)
		}
		if st.ewma.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// SetActive sets the number of calls in flight (for tools and tests).
func (st *Stat) SetActive(n int64) {
	st.active.Store(n)
	st.changed()
}

// Active returns the number of calls in flight.
func (st *Stat) Active() int64 { return st.active.Load() }

// Total returns the number of finished calls.
func (st *Stat) Total() uint64 { return st.total.Load() }

// Failed returns the number of finished calls that failed.
func (st *Stat) Failed() uint64 { return st.failed.Load() }

// Latency returns the moving average of response times, 0 before the
// first sample.
func (st *Stat) Latency() time.Duration {
	return time.Duration(math.Float64frombits(st.ewma.Load()))
}

func (st *Stat) latencyNs() uint64 {
	b := st.ewma.Load()
	if b == 0 {
		return 0
	}
	return uint64(math.Float64frombits(b))
}

// statsBase is what the balancers that read call statistics share: the
// clock, the random source and the statistics.
type statsBase struct {
	now   func() time.Time
	rnd   randSource
	stats *Stats
}

// init reads o.Stats, or makes fresh statistics when it is nil.
func (b *statsBase) init(o Options) {
	b.now, b.rnd, b.stats = o.now(), newRandSource(o.Seed), o.Stats
	if b.stats == nil {
		b.stats = NewStats(b.now)
	}
}

// Stats implements StatsUser.
func (b *statsBase) Stats() *Stats { return b.stats }
