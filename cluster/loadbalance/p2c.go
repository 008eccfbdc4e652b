package loadbalance

import (
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// P2CBalancer is the power of two choices: it draws two distinct providers
// at random and takes the one with the lower load, where load = (moving
// average latency + 1µs) × (calls in flight + 1) / weight. A provider with
// no finished call within ProbeAfter (default 5s) and none in flight is
// taken at once, once per period, so that a provider avoided for being
// slow is measured again (a probe is not repeated after each normal
// response). A provider with no measured latency yet loses against one
// that has one, so a new provider gets its probe rather than a flood of
// calls before its first answer. Weights include warm-up; a weight of 0 is never drawn unless
// every weight is 0.
type P2CBalancer struct {
	statsBase
	probeMs int64
}

var (
	_ LoadBalance = (*P2CBalancer)(nil)
	_ StatsUser   = (*P2CBalancer)(nil)
)

// NewP2C returns a power-of-two-choices balancer reading o.Stats (its own
// when nil).
func NewP2C(o Options) *P2CBalancer {
	b := &P2CBalancer{probeMs: o.probeAfter().Milliseconds()}
	b.init(o)
	return b
}

// Select implements LoadBalance.
func (b *P2CBalancer) Select(invokers []protocol.Invoker, _ *protocol.Invocation) (protocol.Invoker, error) {
	switch len(invokers) {
	case 0:
		return nil, ErrNoInvokers
	case 1:
		return invokers[0], nil
	}
	s := b.cache.get(invokers)
	nowMs := b.now().UnixMilli()
	var x, y int
	if n := len(s.positive); n >= 2 {
		i := b.rnd.intN(n)
		j := b.rnd.intN(n - 1)
		if j >= i {
			j++
		}
		x, y = int(s.positive[i]), int(s.positive[j])
	} else if n == 1 {
		return invokers[s.positive[0]], nil
	} else {
		n = len(s.entries)
		x = b.rnd.intN(n)
		y = b.rnd.intN(n - 1)
		if y >= x {
			y++
		}
	}
	if b.probe(s.entries[x].stat, nowMs) {
		return invokers[x], nil
	}
	if b.probe(s.entries[y].stat, nowMs) {
		return invokers[y], nil
	}
	// a provider without a measured latency gets calls only through its
	// probe, so a new provider is not flooded before its first answer
	ux, uy := s.entries[x].stat.latencyNs() == 0, s.entries[y].stat.latencyNs() == 0
	if ux != uy {
		if ux {
			return invokers[y], nil
		}
		return invokers[x], nil
	}
	warming := s.warming(nowMs)
	lx := b.load(s, x, nowMs, warming)
	ly := b.load(s, y, nowMs, warming)
	if ly < lx {
		return invokers[y], nil
	}
	return invokers[x], nil
}

// probe reports whether the provider should be tried now to refresh its
// statistics, and claims the probe so that only one caller takes it.
func (b *P2CBalancer) probe(st *Stat, nowMs int64) bool {
	if st.Active() > 0 || nowMs-st.lastEnd.Load() <= b.probeMs {
		return false
	}
	last := st.lastProbe.Load()
	if nowMs-last <= b.probeMs {
		return false
	}
	return st.lastProbe.CompareAndSwap(last, nowMs)
}

func (b *P2CBalancer) load(s *snapshot, i int, nowMs int64, warming bool) float64 {
	st := s.entries[i].stat
	w := s.weightAt(i, nowMs, warming)
	if w <= 0 {
		w = 1
	}
	lat := float64(st.latencyNs()) + float64(time.Microsecond)
	return lat * float64(st.Active()+1) / float64(w)
}
