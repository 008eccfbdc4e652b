package loadbalance

import (
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// RandomBalancer is weighted random: each provider is chosen with
// probability weight/total, uniformly when all weights are equal. A weight
// of 0 is never chosen unless every weight left is 0.
type RandomBalancer struct {
	now func() time.Time
	rnd randSource
}

var _ LoadBalance = (*RandomBalancer)(nil)

// NewRandom returns a weighted random balancer.
func NewRandom(o Options) *RandomBalancer {
	return &RandomBalancer{now: o.now(), rnd: newRandSource(o.Seed)}
}

// Build implements LoadBalance: the cumulative weights of the list.
func (b *RandomBalancer) Build(invokers []protocol.Invoker) Picker {
	return &randomPicker{b: b, s: buildSnapshot(invokers, nil)}
}

type randomPicker struct {
	b *RandomBalancer
	s *snapshot
}

// Pick implements Picker: a binary search over the cumulative weights,
// and a linear pass over the providers left when the draw is excluded.
func (p *randomPicker) Pick(_ *protocol.Invocation, ex Exclude) (int, error) {
	s := p.s
	switch len(s.entries) {
	case 0:
		return 0, ErrNoInvokers
	case 1:
		// The one provider, whatever its weight (as pickWeighted gives it,
		// and pickWeightedExcluding would give it), with no clock read.
		if !excluded(ex, 0) {
			return 0, nil
		}
		return 0, ErrNoInvokers
	}
	nowMs := s.warmClockMs(p.b.now)
	i := pickWeighted(s, p.b.rnd, nowMs)
	if !excluded(ex, i) {
		return i, nil
	}
	return pickWeightedExcluding(s, p.b.rnd, nowMs, ex)
}

// pickWeightedExcluding is weighted random over the entries ex does not
// exclude; uniform when their weights are all equal or all 0.
func pickWeightedExcluding(s *snapshot, rnd randSource, nowMs int64, ex Exclude) (int, error) {
	warming := s.warming(nowMs)
	var total int64
	left, last := 0, -1
	for i := range s.entries {
		if excluded(ex, i) {
			continue
		}
		total += s.weightAt(i, nowMs, warming)
		left++
		last = i
	}
	if left == 0 {
		return 0, ErrNoInvokers
	}
	if total <= 0 {
		k := rnd.intN(left)
		for i := range s.entries {
			if !excluded(ex, i) {
				if k == 0 {
					return i, nil
				}
				k--
			}
		}
		return last, nil
	}
	offset := rnd.int64N(total)
	for i := range s.entries {
		if excluded(ex, i) {
			continue
		}
		if offset -= s.weightAt(i, nowMs, warming); offset < 0 {
			return i, nil
		}
	}
	return last, nil // availability changed between the passes
}

// pickWeighted returns an index chosen by weighted random over all entries.
func pickWeighted(s *snapshot, rnd randSource, nowMs int64) int {
	n := len(s.entries)
	if !s.warming(nowMs) {
		if s.total <= 0 || s.same {
			return rnd.intN(n)
		}
		offset := rnd.int64N(s.total)
		// the first index whose cumulative weight exceeds offset
		lo, hi := 0, n-1
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if s.cum[mid] > offset {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo
	}
	var total int64
	same := true
	first := int64(-1)
	for i := range n {
		w := s.weightAt(i, nowMs, true)
		total += w
		if first < 0 {
			first = w
		} else if w != first {
			same = false
		}
	}
	if total <= 0 || same {
		return rnd.intN(n)
	}
	offset := rnd.int64N(total)
	for i := range n {
		offset -= s.weightAt(i, nowMs, true)
		if offset < 0 {
			return i
		}
	}
	return n - 1
}
