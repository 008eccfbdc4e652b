package loadbalance

import (
	"sync"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// RoundRobinBalancer is smooth weighted round robin (the Nginx algorithm
// Dubbo uses), with its state kept per service and method: each pick adds
// every provider's weight to its current value, chooses the largest (the
// first on ties) and subtracts the total from it. Weights A=5, B=1, C=1 give
// A A B A C A A, then repeat; equal weights give plain rotation.
//
// Select and update run under a lock per service and method, so concurrent
// callers never skew the sequence, and different methods never contend. A
// weight change (warm-up) does not reset the current values. The state of
// providers that left the list is recycled after RecyclePeriod.
type RoundRobinBalancer struct {
	now     func() time.Time
	cache   snapCache
	methods perMethod[rrState]
}

var _ LoadBalance = (*RoundRobinBalancer)(nil)

type rrEntry struct {
	current  int64
	lastSeen int64 // unix ms when it was last part of a list
}

type rrState struct {
	mu      sync.Mutex
	base    *snapshot
	entries []*rrEntry // aligned with base.entries
	byKey   map[string]*rrEntry
	next    int // rotation when every weight is 0
}

// NewRoundRobin returns a smooth weighted round-robin balancer.
func NewRoundRobin(o Options) *RoundRobinBalancer {
	b := &RoundRobinBalancer{now: o.now()}
	b.methods.newT = func() *rrState { return &rrState{byKey: map[string]*rrEntry{}} }
	return b
}

// Select implements LoadBalance.
func (b *RoundRobinBalancer) Select(invokers []protocol.Invoker, inv *protocol.Invocation) (protocol.Invoker, error) {
	if len(invokers) == 0 {
		return nil, ErrNoInvokers
	}
	s := b.cache.get(invokers)
	nowMs := b.now().UnixMilli()
	st := b.methods.get(inv, nowMs)
	st.mu.Lock()
	if st.base != s {
		st.rebind(s, nowMs)
	}
	i := st.pick(s, nowMs)
	st.mu.Unlock()
	return invokers[i], nil
}

// rebind aligns the state with a new list, keeping the current values of
// providers still listed and recycling those gone for RecyclePeriod.
func (st *rrState) rebind(s *snapshot, nowMs int64) {
	for _, e := range st.entries {
		e.lastSeen = nowMs
	}
	st.entries = make([]*rrEntry, len(s.entries))
	for i := range s.entries {
		e, ok := st.byKey[s.entries[i].key]
		if !ok {
			e = &rrEntry{}
			st.byKey[s.entries[i].key] = e
		}
		e.lastSeen = nowMs
		st.entries[i] = e
	}
	cutoff := nowMs - RecyclePeriod.Milliseconds()
	for k, e := range st.byKey {
		if e.lastSeen < cutoff {
			delete(st.byKey, k)
		}
	}
	st.base = s
}

func (st *rrState) pick(s *snapshot, nowMs int64) int {
	warming := s.warming(nowMs)
	var total int64
	best := -1
	var bestCur int64
	for i, e := range st.entries {
		w := s.weightAt(i, nowMs, warming)
		if w <= 0 {
			continue
		}
		e.current += w
		total += w
		if best < 0 || e.current > bestCur {
			best, bestCur = i, e.current
		}
	}
	if best < 0 { // every weight is 0: plain rotation
		st.next = (st.next + 1) % len(st.entries)
		return st.next
	}
	st.entries[best].current -= total
	return best
}

// methodStates returns the number of service-method states held (tests).
func (b *RoundRobinBalancer) methodStates() int { return b.methods.len() }
