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
// A A B A C A A, then repeat; equal weights give plain rotation. Excluded
// providers (tried, or down) sit out the pick.
//
// A pick runs under a lock per service and method, so concurrent callers
// never skew the sequence, and different methods never contend. The current
// values belong to the balancer, keyed by provider identity: a new list,
// another route or a weight change (warm-up) does not reset them. The
// state of providers that left every list is recycled after RecyclePeriod.
type RoundRobinBalancer struct {
	now     func() time.Time
	methods perMethod[rrState]
}

var _ LoadBalance = (*RoundRobinBalancer)(nil)

type rrEntry struct {
	current  int64
	lastSeen int64 // unix ms when it was last part of a pick
}

// rrState is the state of one service and method, shared by the pickers
// of every list.
type rrState struct {
	mu    sync.Mutex
	byKey map[string]*rrEntry
	next  int // rotation when every weight is 0
}

// NewRoundRobin returns a smooth weighted round-robin balancer.
func NewRoundRobin(o Options) *RoundRobinBalancer {
	b := &RoundRobinBalancer{now: o.now()}
	b.methods.newT = func() *rrState { return &rrState{byKey: map[string]*rrEntry{}} }
	return b
}

// Build implements LoadBalance.
func (b *RoundRobinBalancer) Build(invokers []protocol.Invoker) Picker {
	p := &rrPicker{b: b, s: buildSnapshot(invokers, nil)}
	p.views.newT = func() *rrView { return &rrView{} }
	return p
}

type rrPicker struct {
	b     *RoundRobinBalancer
	s     *snapshot
	views perMethod[rrView]
}

// rrView aligns one method's entries with the picker's list; it is bound
// on the method's first pick, under the method's lock.
type rrView struct {
	entries []*rrEntry
}

// Pick implements Picker.
func (p *rrPicker) Pick(inv *protocol.Invocation, ex Exclude) (int, error) {
	s := p.s
	if len(s.entries) == 0 {
		return 0, ErrNoInvokers
	}
	nowMs := p.b.now().UnixMilli()
	st := p.b.methods.get(inv, nowMs)
	v := p.views.get(inv, nowMs)
	st.mu.Lock()
	defer st.mu.Unlock()
	if v.entries == nil {
		v.entries = st.bind(s, nowMs)
	}
	return st.pick(s, v.entries, nowMs, ex)
}

// bind returns the entries of s's providers, keeping the current values
// of providers already known and recycling those not picked for
// RecyclePeriod.
func (st *rrState) bind(s *snapshot, nowMs int64) []*rrEntry {
	out := make([]*rrEntry, len(s.entries))
	for i := range s.entries {
		e, ok := st.byKey[s.entries[i].key]
		if !ok {
			e = &rrEntry{}
			st.byKey[s.entries[i].key] = e
		}
		e.lastSeen = nowMs
		out[i] = e
	}
	cutoff := nowMs - RecyclePeriod.Milliseconds()
	for k, e := range st.byKey {
		if e.lastSeen < cutoff {
			delete(st.byKey, k)
		}
	}
	return out
}

func (st *rrState) pick(s *snapshot, entries []*rrEntry, nowMs int64, ex Exclude) (int, error) {
	warming := s.warming(nowMs)
	var total int64
	best, left := -1, 0
	var bestCur int64
	for i, e := range entries {
		if excluded(ex, i) {
			continue
		}
		left++
		e.lastSeen = nowMs
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
	if best >= 0 {
		entries[best].current -= total
		return best, nil
	}
	if left == 0 {
		return 0, ErrNoInvokers
	}
	for range entries { // every weight left is 0: plain rotation
		st.next = (st.next + 1) % len(entries)
		if !excluded(ex, st.next) {
			return st.next, nil
		}
	}
	return 0, ErrNoInvokers
}

// methodStates returns the number of service-method states held (tests).
func (b *RoundRobinBalancer) methodStates() int { return b.methods.len() }
