package loadbalance

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// Weight returns the effective weight of the provider at u at time now:
// its weight parameter (default 100), reduced during warm-up. When the URL
// carries the provider's start time (timestamp) and the weight is positive,
// the weight grows linearly from 1 at start to the full weight after the
// warm-up period (URL.Warmup, default 10 minutes), as Dubbo computes it: a
// start time in the future (clock skew) gives 1. A weight of 0 stays 0.
func Weight(u *protocol.URL, now time.Time) int {
	w := int64(u.Weight())
	ts := u.Timestamp()
	if ts.IsZero() {
		return int(w)
	}
	return int(warmWeight(w, ts.UnixMilli(), u.Warmup().Milliseconds(), now.UnixMilli()))
}

// warmWeight applies warm-up to weight w for a provider started at
// startMs (0: unknown) with a warm-up of warmupMs, at nowMs.
func warmWeight(w, startMs, warmupMs, nowMs int64) int64 {
	if w <= 0 {
		return 0
	}
	if startMs <= 0 || warmupMs <= 0 {
		return w
	}
	uptime := nowMs - startMs
	if uptime < 0 {
		return 1
	}
	if uptime >= warmupMs {
		return w
	}
	// uptime×w can pass 2^63 (a weight near MaxWeight warming up over
	// more than 50 days): the product is taken in 128 bits; the quotient
	// is below w, as uptime < warmupMs.
	hi, lo := bits.Mul64(uint64(uptime), uint64(w))
	q, _ := bits.Div64(hi, lo, uint64(warmupMs))
	ww := int64(q)
	if ww < 1 {
		return 1
	}
	return min(ww, w)
}

// entry is what a balancer derives once from one invoker of a list.
type entry struct {
	weight   int64 // configured weight
	startMs  int64 // provider start time, 0 when unknown
	warmupMs int64
	url      *protocol.URL
	key      string // protocol://host:port/servicekey, the provider identity
}

// snapshot holds what a picker derives once from its provider list. It is
// immutable, except for the statistics it looks up again when the Stats
// recycle entries.
type snapshot struct {
	entries []entry
	// warmUntilMs is the time after which every weight is its configured
	// weight; 0 when no provider warms up.
	warmUntilMs int64
	// warmOver is set once a pick found the time past warmUntilMs: the
	// picks after it read no clock.
	warmOver atomic.Bool
	// static weights: cumulative sums, total, whether all are equal.
	cum      []int64
	total    int64
	same     bool
	positive []int32 // indexes of entries with a positive weight
	every    []int32 // indexes of all entries, when none has a positive weight

	stats *Stats // nil when the balancer keeps no statistics
	stat  atomic.Pointer[statList]
}

// statList is the Stat of every entry, for one generation of the Stats.
type statList struct {
	gen uint64
	st  []*Stat
}

func buildSnapshot(invokers []protocol.Invoker, stats *Stats) *snapshot {
	s := &snapshot{
		entries: make([]entry, len(invokers)),
		cum:     make([]int64, len(invokers)),
		same:    true,
		stats:   stats,
	}
	var sum int64
	for i, inv := range invokers {
		u := inv.URL()
		e := entry{weight: int64(u.Weight()), warmupMs: u.Warmup().Milliseconds(), url: u, key: identity(u)}
		if ts := u.Timestamp(); !ts.IsZero() {
			e.startMs = ts.UnixMilli()
			if e.weight > 0 && e.warmupMs > 0 {
				s.warmUntilMs = max(s.warmUntilMs, e.startMs+e.warmupMs)
			}
		}
		s.entries[i] = e
		sum += e.weight
		s.cum[i] = sum
		if e.weight != s.entries[0].weight {
			s.same = false
		}
		if e.weight > 0 {
			s.positive = append(s.positive, int32(i))
		}
	}
	s.total = sum
	if len(s.positive) == 0 {
		s.every = make([]int32, len(s.entries))
		for i := range s.every {
			s.every[i] = int32(i)
		}
	}
	if stats != nil {
		s.statsNow()
	}
	return s
}

// statsNow returns the Stat of every entry. The Stats recycle idle entries
// (a new generation); the list is then looked up again, once.
func (s *snapshot) statsNow() []*Stat {
	gen := s.stats.gen.Load()
	if l := s.stat.Load(); l != nil && l.gen == gen {
		return l.st
	}
	l := &statList{gen: gen, st: make([]*Stat, len(s.entries))}
	for i := range s.entries {
		l.st[i] = s.stats.forURL(s.entries[i].url)
	}
	s.stat.Store(l)
	return l.st
}

// all returns the indexes of every entry when none has a positive weight.
func (s *snapshot) all() []int32 { return s.every }

// identity is the provider identity used to key per-provider state.
func identity(u *protocol.URL) string {
	return u.Protocol + "://" + u.Address() + "/" + u.ServiceKey()
}

// warmClockMs returns the time in unix milliseconds for the weights of a
// pick, read with now only while a provider may still be warming up:
// with no warm-up it returns 0, and once a pick has seen the warm-up over
// it returns warmUntilMs without reading the clock (a clock read is 0.1
// µs on a virtual machine, and the warm-up is over for good unless the
// wall clock is set back past its end). warming is false for both.
func (s *snapshot) warmClockMs(now func() time.Time) int64 {
	if s.warmUntilMs == 0 {
		return 0
	}
	if s.warmOver.Load() {
		return s.warmUntilMs
	}
	nowMs := now().UnixMilli()
	if nowMs >= s.warmUntilMs {
		s.warmOver.Store(true)
	}
	return nowMs
}

// warming reports whether weights at nowMs may differ from the static ones.
func (s *snapshot) warming(nowMs int64) bool { return s.warmUntilMs > 0 && nowMs < s.warmUntilMs }

// weightAt returns entry i's effective weight.
func (s *snapshot) weightAt(i int, nowMs int64, warming bool) int64 {
	e := &s.entries[i]
	if !warming {
		return e.weight
	}
	return warmWeight(e.weight, e.startMs, e.warmupMs, nowMs)
}
