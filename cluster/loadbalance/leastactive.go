package loadbalance

import (
	"sync"

	"github.com/minidubbo/minidubbo/protocol"
)

// LeastActiveBalancer picks the provider with the fewest calls in flight,
// breaking ties by weighted random (weights, with warm-up, matter only
// among the equally least active, as in Dubbo). The in-flight counts come
// from Stats, which the cluster invoker updates on every call; no filter
// needs to be configured. Providers of weight 0 are skipped unless every
// weight is 0.
type LeastActiveBalancer struct {
	statsBase
}

var (
	_ LoadBalance = (*LeastActiveBalancer)(nil)
	_ StatsUser   = (*LeastActiveBalancer)(nil)
)

// NewLeastActive returns a least-active balancer reading o.Stats (its own
// when nil).
func NewLeastActive(o Options) *LeastActiveBalancer {
	b := &LeastActiveBalancer{}
	b.init(o)
	return b
}

// Build implements LoadBalance.
func (b *LeastActiveBalancer) Build(invokers []protocol.Invoker) Picker {
	s := buildSnapshot(invokers, b.stats)
	return &leastActivePicker{b: b, s: s, ix: newLeastActiveIndex(s)}
}

type leastActivePicker struct {
	b  *LeastActiveBalancer
	s  *snapshot
	ix *leastActiveIndex // nil for short lists
}

// Pick implements Picker: through the index for long lists (about √n
// work), or a scan of every provider.
func (p *leastActivePicker) Pick(_ *protocol.Invocation, ex Exclude) (int, error) {
	s := p.s
	nowMs := s.warmClockMs(p.b.now)
	warming := s.warming(nowMs)
	if p.ix != nil && !warming && p.ix.mu.TryLock() {
		i, ok := p.ix.pick(s, p.b.rnd, ex)
		p.ix.mu.Unlock()
		if ok {
			return i, nil
		}
	}
	return p.scan(nowMs, warming, ex)
}

// scan is a pick that reads every provider's count.
func (p *leastActivePicker) scan(nowMs int64, warming bool, ex Exclude) (int, error) {
	s := p.s
	allZero := len(s.positive) == 0
	stats := s.statsNow()
	tp := tiePool.Get().(*[]tie)
	ties := (*tp)[:0]
	defer func() { *tp = ties[:0]; tiePool.Put(tp) }()
	least := int64(-1)
	var zeros bool // an available provider of weight 0 was passed over
	for i := range s.entries {
		if excluded(ex, i) {
			continue
		}
		w := s.weightAt(i, nowMs, warming)
		if w <= 0 {
			if !allZero {
				zeros = true
				continue
			}
			w = 1
		}
		a := stats[i].Active()
		switch {
		case least < 0 || a < least:
			least = a
			ties = append(ties[:0], tie{int32(i), w})
		case a == least:
			ties = append(ties, tie{int32(i), w})
		}
	}
	if len(ties) == 0 {
		if zeros { // only providers of weight 0 are left
			return pickWeightedExcluding(s, p.b.rnd, nowMs, ex)
		}
		return 0, ErrNoInvokers
	}
	return pickTie(ties, p.b.rnd), nil
}

// tiePool recycles the tie buffers of Select, so that many equally loaded
// providers do not cost an allocation per call.
var tiePool = sync.Pool{New: func() any { s := make([]tie, 0, 64); return &s }}

// tie is a candidate index and its weight.
type tie struct {
	i int32
	w int64
}

// pickTie chooses among ties by weighted random.
func pickTie(ties []tie, rnd randSource) int {
	if len(ties) == 1 {
		return int(ties[0].i)
	}
	var total int64
	same := true
	for _, t := range ties {
		total += t.w
		if t.w != ties[0].w {
			same = false
		}
	}
	if same || total <= 0 {
		return int(ties[rnd.intN(len(ties))].i)
	}
	offset := rnd.int64N(total)
	for _, t := range ties {
		offset -= t.w
		if offset < 0 {
			return int(t.i)
		}
	}
	return int(ties[len(ties)-1].i)
}
