package loadbalance

import (
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
	ww := uptime * w / warmupMs
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
	addr     string // host:port, the consistent-hash identity
	key      string // protocol://host:port/servicekey, the provider identity
	stat     *Stat  // nil when the balancer keeps no statistics
}

// snapshot holds what a balancer derives from one invoker slice. It is
// immutable once published.
type snapshot struct {
	invokers []protocol.Invoker
	entries  []entry
	// warmUntilMs is the time after which every weight is its configured
	// weight; 0 when no provider warms up.
	warmUntilMs int64
	// static weights: cumulative sums, total, whether all are equal.
	cum      []int64
	total    int64
	same     bool
	positive []int32 // indexes of entries with a positive weight
	statsGen uint64
}

// sameSlice reports whether a and b are the same slice (same backing
// array and length); cached snapshots keep their slice alive, so the
// address cannot be reused by another list.
func sameSlice(a, b []protocol.Invoker) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

func buildSnapshot(invokers []protocol.Invoker, stats *Stats) *snapshot {
	s := &snapshot{
		invokers: invokers,
		entries:  make([]entry, len(invokers)),
		cum:      make([]int64, len(invokers)),
		same:     true,
	}
	if stats != nil {
		s.statsGen = stats.gen.Load()
	}
	var sum int64
	for i, inv := range invokers {
		u := inv.URL()
		e := entry{weight: int64(u.Weight()), warmupMs: u.Warmup().Milliseconds()}
		if ts := u.Timestamp(); !ts.IsZero() {
			e.startMs = ts.UnixMilli()
			if e.weight > 0 && e.warmupMs > 0 {
				s.warmUntilMs = max(s.warmUntilMs, e.startMs+e.warmupMs)
			}
		}
		e.addr = u.Address()
		e.key = identity(u)
		if stats != nil {
			e.stat = stats.forURL(u)
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
	return s
}

// identity is the provider identity used to key per-provider state.
func identity(u *protocol.URL) string {
	return u.Protocol + "://" + u.Address() + "/" + u.ServiceKey()
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

// snapCache is a one-entry cache of the snapshot of the last slice seen.
type snapCache struct {
	p     atomic.Pointer[snapshot]
	stats *Stats
}

func (c *snapCache) get(invokers []protocol.Invoker) *snapshot {
	s := c.p.Load()
	if s != nil && sameSlice(s.invokers, invokers) && (c.stats == nil || s.statsGen == c.stats.gen.Load()) {
		return s
	}
	s = buildSnapshot(invokers, c.stats)
	c.p.Store(s)
	return s
}
