package loadbalance

import (
	"github.com/minidubbo/minidubbo/protocol"
)

// ShortestResponseBalancer picks the provider with the lowest estimate
// recent response time × (calls in flight + 1), breaking ties by weighted
// random. The recent response time is a moving average kept in Stats; a
// provider with no finished call within ProbeAfter (default 5s) — new, or
// long avoided — is estimated at the average of the others, so it gets its
// share and its response time is learnt again, rather than being avoided
// forever for one bad sample.
type ShortestResponseBalancer struct {
	statsBase
	staleMs int64
}

var (
	_ LoadBalance = (*ShortestResponseBalancer)(nil)
	_ StatsUser   = (*ShortestResponseBalancer)(nil)
)

// NewShortestResponse returns a shortest-response balancer reading o.Stats
// (its own when nil).
func NewShortestResponse(o Options) *ShortestResponseBalancer {
	b := &ShortestResponseBalancer{staleMs: o.probeAfter().Milliseconds()}
	b.init(o)
	return b
}

// Build implements LoadBalance.
func (b *ShortestResponseBalancer) Build(invokers []protocol.Invoker) Picker {
	s := buildSnapshot(invokers, b.stats)
	return &shortestPicker{b: b, s: s, ix: newShortestIndex(s)}
}

type shortestPicker struct {
	b  *ShortestResponseBalancer
	s  *snapshot
	ix *shortestIndex // nil for short lists
}

// Pick implements Picker: through the index for long lists (about √n
// work), or a scan of every provider.
func (p *shortestPicker) Pick(_ *protocol.Invocation, ex Exclude) (int, error) {
	nowMs := p.b.now().UnixMilli()
	warming := p.s.warming(nowMs)
	if p.ix != nil && !warming && p.ix.mu.TryLock() {
		i, ok := p.ix.pick(p.s, p.b, nowMs, ex)
		p.ix.mu.Unlock()
		if ok {
			return i, nil
		}
	}
	return p.scan(nowMs, warming, ex)
}

// scan is a pick that reads every provider's statistics.
func (p *shortestPicker) scan(nowMs int64, warming bool, ex Exclude) (int, error) {
	s, b := p.s, p.b
	allZero := len(s.positive) == 0
	stats := s.statsNow()
	// first pass: the mean latency of providers with a recent sample
	var sum, known uint64
	for i := range s.entries {
		if rt := b.recent(stats[i], nowMs); rt > 0 {
			sum += rt
			known++
		}
	}
	mean := uint64(1)
	if known > 0 {
		mean = max(sum/known, 1)
	}
	tp := tiePool.Get().(*[]tie)
	ties := (*tp)[:0]
	defer func() { *tp = ties[:0]; tiePool.Put(tp) }()
	var least uint64
	var zeros bool
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
		st := stats[i]
		rt := b.recent(st, nowMs)
		if rt == 0 {
			rt = mean
		}
		est := rt * uint64(max(st.Active(), 0)+1)
		switch {
		case len(ties) == 0 || est < least:
			least = est
			ties = append(ties[:0], tie{int32(i), w})
		case est == least:
			ties = append(ties, tie{int32(i), w})
		}
	}
	if len(ties) == 0 {
		if zeros {
			return pickWeightedExcluding(s, b.rnd, nowMs, ex)
		}
		return 0, ErrNoInvokers
	}
	return pickTie(ties, b.rnd), nil
}

// recent returns the provider's average response time in ns, or 0 when it
// has none or it is older than the probe period.
func (b *ShortestResponseBalancer) recent(st *Stat, nowMs int64) uint64 {
	if nowMs-st.lastEnd.Load() > b.staleMs {
		return 0
	}
	return st.latencyNs()
}
