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

// Build implements LoadBalance.
func (b *P2CBalancer) Build(invokers []protocol.Invoker) Picker {
	return &p2cPicker{b: b, s: buildSnapshot(invokers, b.stats)}
}

type p2cPicker struct {
	b *P2CBalancer
	s *snapshot
}

// Pick implements Picker.
func (p *p2cPicker) Pick(_ *protocol.Invocation, ex Exclude) (int, error) {
	s, b := p.s, p.b
	x, y, err := p.draw(ex)
	if err != nil || x == y {
		return x, err
	}
	nowMs := b.now().UnixMilli()
	stats := s.statsNow()
	if b.probe(stats[x], nowMs) {
		return x, nil
	}
	if b.probe(stats[y], nowMs) {
		return y, nil
	}
	// a provider without a measured latency gets calls only through its
	// probe, so a new provider is not flooded before its first answer
	ux, uy := stats[x].latencyNs() == 0, stats[y].latencyNs() == 0
	if ux != uy {
		if ux {
			return y, nil
		}
		return x, nil
	}
	warming := s.warming(nowMs)
	lx := b.load(s, stats[x], x, nowMs, warming)
	ly := b.load(s, stats[y], y, nowMs, warming)
	if ly < lx {
		return y, nil
	}
	return x, nil
}

// draw returns two distinct providers that ex does not exclude, drawn
// uniformly from those of positive weight (from all when every weight is
// 0), or the same one twice when only one is left.
func (p *p2cPicker) draw(ex Exclude) (x, y int, err error) {
	s := p.s
	pool := s.positive
	if len(pool) == 0 {
		pool = s.all()
	}
	n := len(pool)
	if n == 0 {
		return 0, 0, ErrNoInvokers
	}
	if n >= 2 {
		for range 4 { // a few draws, then the slow path
			i := p.b.rnd.intN(n)
			j := p.b.rnd.intN(n - 1)
			if j >= i {
				j++
			}
			x, y = int(pool[i]), int(pool[j])
			if !excluded(ex, x) && !excluded(ex, y) {
				return x, y, nil
			}
		}
	}
	// count what is left, then draw among it
	left := 0
	for _, k := range pool {
		if !excluded(ex, int(k)) {
			left++
		}
	}
	switch left {
	case 0:
		if len(s.positive) > 0 && len(s.positive) < len(s.entries) {
			i, err := pickWeightedExcluding(s, p.b.rnd, 0, ex) // weight 0 is all that is left
			return i, i, err
		}
		return 0, 0, ErrNoInvokers
	case 1:
		for _, k := range pool {
			if !excluded(ex, int(k)) {
				return int(k), int(k), nil
			}
		}
		return 0, 0, ErrNoInvokers
	}
	a := p.b.rnd.intN(left)
	c := p.b.rnd.intN(left - 1)
	if c >= a {
		c++
	}
	x, y = -1, -1
	for _, k := range pool {
		if excluded(ex, int(k)) {
			continue
		}
		if a == 0 {
			x = int(k)
		}
		if c == 0 {
			y = int(k)
		}
		a--
		c--
	}
	if x < 0 || y < 0 { // availability changed between the passes
		return 0, 0, ErrNoInvokers
	}
	return x, y, nil
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

func (b *P2CBalancer) load(s *snapshot, st *Stat, i int, nowMs int64, warming bool) float64 {
	w := s.weightAt(i, nowMs, warming)
	if w <= 0 {
		w = 1
	}
	lat := float64(st.latencyNs()) + float64(time.Microsecond)
	return lat * float64(st.Active()+1) / float64(w)
}
