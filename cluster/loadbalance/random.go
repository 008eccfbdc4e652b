package loadbalance

import (
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// RandomBalancer is weighted random: each provider is chosen with
// probability weight/total, uniformly when all weights are equal. A weight
// of 0 is never chosen unless every weight is 0.
type RandomBalancer struct {
	now   func() time.Time
	rnd   randSource
	cache snapCache
}

var _ LoadBalance = (*RandomBalancer)(nil)

// NewRandom returns a weighted random balancer.
func NewRandom(o Options) *RandomBalancer {
	return &RandomBalancer{now: o.now(), rnd: newRandSource(o.Seed)}
}

// Select implements LoadBalance.
func (b *RandomBalancer) Select(invokers []protocol.Invoker, _ *protocol.Invocation) (protocol.Invoker, error) {
	switch len(invokers) {
	case 0:
		return nil, ErrNoInvokers
	case 1:
		return invokers[0], nil
	}
	s := b.cache.get(invokers)
	nowMs := int64(0)
	if s.warmUntilMs > 0 {
		nowMs = b.now().UnixMilli()
	}
	return invokers[pickWeighted(s, b.rnd, nowMs)], nil
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
