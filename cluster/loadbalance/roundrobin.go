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
// Over lists of more than 8 providers a pick costs O(log² n) amortized
// (O(log n) when the weights are equal) instead of the O(n) of adding every
// weight: the current values are lines in the number of rounds, kept in a
// kinetic tournament tree (rrtree.go) that recomputes a comparison only when
// one line overtakes another, and warm-up weight changes are applied when
// they fall due (a heap of their times). The sequence is the one the
// additions give; shorter lists are scanned.
//
// An excluded provider (tried by this call, or down) whose turn comes is
// charged the turn as if picked and the round is repeated, so the others
// share its turns by weight and it does not come back with a burst. After 8
// excluded turns in one pick, that pick and the next n (most of the list
// is down) scan the list with the excluded providers sitting out (no weight
// added, none of the total), as the O(n) algorithm always did.
//
// Lists of one method that share providers (routes) share their current
// values: a list's tree holds them while it picks, and another list takes
// them back first (O(n)); lists that take turns faster than n/8 picks are
// scanned instead.
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

// rrEntry is one provider's state for one method. Its current value lives
// in the tree of the view that owns it (owner), or here when none does.
type rrEntry struct {
	current  int64
	lastSeen int64 // unix ms when it was last part of a pick
	owner    *rrView
	mark     uint64 // the bind that last listed it
}

// seen returns when e was last part of a pick.
func (e *rrEntry) seen() int64 {
	if e.owner != nil {
		return max(e.lastSeen, e.owner.lastMs)
	}
	return e.lastSeen
}

// rrState is the state of one service and method, shared by the pickers
// of every list.
type rrState struct {
	mu     sync.Mutex
	byKey  map[string]*rrEntry
	next   int    // rotation when every weight is 0
	binds  uint64 // binds so far, to find a provider listed twice
	owners int    // views whose trees hold current values
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
	p.views.newT = func() *rrView { return &rrView{stolen: -1} }
	return p
}

type rrPicker struct {
	b     *RoundRobinBalancer
	s     *snapshot
	views perMethod[rrView]
}

// rrView aligns one method's entries with the picker's list; it is bound
// on the method's first pick, under the method's lock. While it owns its
// entries (owned), their current values are its tree's lines: another view
// that needs one of them first writes them back (flush).
type rrView struct {
	entries []*rrEntry
	scan    bool  // a short list, or a provider listed twice: always the scan
	owned   bool  // the tree holds the current value of every entry
	lastMs  int64 // unix ms of the last pick
	warmMs  int64 // unix ms the weights were computed for
	total   int64 // sum of the weights
	tree    rrTree
	warm    warmHeap

	// Lists of one method that share providers and take turns faster
	// than building a tree pays off are scanned for a while instead.
	picks    int // picks since the tree was built
	stolen   int // picks the tree lasted before another view took it; -1: not taken
	scanLeft int // picks left to scan before building a tree again

	// After a pick that found 8 excluded turns, the next n picks scan
	// with the excluded providers sitting out.
	heavyLeft int
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
		var dup bool
		v.entries, dup = st.bind(s, nowMs)
		v.scan = dup || len(v.entries) <= scanMax
	}
	return st.pick(s, v, nowMs, ex)
}

// bind returns the entries of s's providers, keeping the current values
// of providers already known and recycling those not picked for
// RecyclePeriod, and whether a provider is listed twice.
func (st *rrState) bind(s *snapshot, nowMs int64) ([]*rrEntry, bool) {
	out := make([]*rrEntry, len(s.entries))
	dup := false
	st.binds++
	for i := range s.entries {
		e, ok := st.byKey[s.entries[i].key]
		if !ok {
			e = &rrEntry{}
			st.byKey[s.entries[i].key] = e
		}
		dup = dup || e.mark == st.binds
		e.mark = st.binds
		e.lastSeen = nowMs
		out[i] = e
	}
	cutoff := nowMs - RecyclePeriod.Milliseconds()
	for k, e := range st.byKey {
		if e.seen() < cutoff {
			delete(st.byKey, k)
		}
	}
	return out, dup
}

// scanMax is the longest list picked by the scan: shorter ones pick
// faster without the tree.
const scanMax = 8

// maxPasses bounds the excluded turns one pick charges before it scans.
const maxPasses = 8

func (st *rrState) pick(s *snapshot, v *rrView, nowMs int64, ex Exclude) (int, error) {
	if v.heavyLeft > 0 { // most providers excluded lately
		v.heavyLeft--
		v.release(st)
		return st.scan(s, v.entries, nowMs, ex)
	}
	if !v.owned && v.stolen >= 0 {
		// Another list took this one's providers: when it did so soon
		// after the tree was built, scan as many picks as the list is long.
		if v.stolen < len(v.entries)/8 {
			v.scanLeft = len(v.entries)
		}
		v.stolen = -1
	}
	if v.scan || v.scanLeft > 0 {
		v.scanLeft = max(v.scanLeft-1, 0)
		return st.scanPasses(s, v, nowMs, ex)
	}
	if !v.owned || v.tree.k >= rrRebase || (v.warm.len() > 0 && nowMs < v.warmMs) {
		v.acquire(st, s, nowMs)
	}
	v.picks++
	if v.total == 0 { // every weight is 0: plain rotation
		v.lastMs = nowMs
		return st.rotate(v.entries, ex)
	}
	v.lastMs = nowMs
	v.rewarm(s, nowMs)
	t := &v.tree
	for range maxPasses {
		t.advance()
		best := t.best()
		t.charge(best, v.total)
		if !excluded(ex, best) {
			return best, nil
		}
	}
	v.heavyLeft = len(v.entries)
	v.release(st)
	return st.scan(s, v.entries, nowMs, ex)
}

// scanPasses is pick by the scan: the excluded providers' turns charged
// and the round repeated, up to maxPasses, as the tree does.
func (st *rrState) scanPasses(s *snapshot, v *rrView, nowMs int64, ex Exclude) (int, error) {
	v.release(st)
	if len(s.positive) > 0 {
		for range maxPasses {
			i, _ := st.scan(s, v.entries, nowMs, nil)
			if !excluded(ex, i) {
				return i, nil
			}
		}
		v.heavyLeft = len(v.entries)
	}
	return st.scan(s, v.entries, nowMs, ex)
}

// rotate picks the next provider not excluded in list order.
func (st *rrState) rotate(entries []*rrEntry, ex Exclude) (int, error) {
	for range entries {
		st.next = (st.next + 1) % len(entries)
		if !excluded(ex, st.next) {
			return st.next, nil
		}
	}
	return 0, ErrNoInvokers
}

// scan is smooth weighted round robin over the entries' own current
// values, the excluded providers sitting out. Every entry must be free of
// owners (release).
func (st *rrState) scan(s *snapshot, entries []*rrEntry, nowMs int64, ex Exclude) (int, error) {
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
	return st.rotate(entries, ex)
}

// release writes back the current values of v's entries held in any
// view's tree, v's own included.
func (v *rrView) release(st *rrState) {
	if st.owners == 0 {
		return // no tree holds any value
	}
	for _, e := range v.entries {
		if o := e.owner; o != nil {
			if o != v {
				o.stolen = o.picks
			}
			o.flush(st)
		}
	}
}

// flush writes the tree's current values back to v's entries and gives
// them up.
func (v *rrView) flush(st *rrState) {
	if !v.owned {
		return
	}
	st.owners--
	for i, e := range v.entries {
		e.current = v.tree.value(i)
		e.lastSeen = max(e.lastSeen, v.lastMs)
		e.owner = nil
	}
	v.owned = false
}

// acquire takes v's entries from the views holding them and builds the
// tree from their current values and the weights at nowMs.
func (v *rrView) acquire(st *rrState, s *snapshot, nowMs int64) {
	v.release(st)
	n := len(v.entries)
	warming := s.warming(nowMs)
	t := &v.tree
	t.reset(n)
	v.warm.reset(n)
	v.total = 0
	for i, e := range v.entries {
		w := max(s.weightAt(i, nowMs, warming), 0)
		t.base[i], t.w[i] = e.current, w
		v.total += w
		e.owner = v
		if at := nextWarmChange(&s.entries[i], w, nowMs); at > 0 {
			v.warm.push(at, int32(i))
		}
	}
	t.build()
	v.owned, v.warmMs, v.picks = true, nowMs, 0
	st.owners++
}

// rewarm applies the warm-up weight changes due by nowMs.
func (v *rrView) rewarm(s *snapshot, nowMs int64) {
	if v.warm.len() == 0 || v.warm.minAt() > nowMs {
		return
	}
	v.warmMs = nowMs
	for v.warm.len() > 0 && v.warm.minAt() <= nowMs {
		i := int(v.warm.pop())
		e := &s.entries[i]
		w := warmWeight(e.weight, e.startMs, e.warmupMs, nowMs)
		v.total += w - v.tree.w[i]
		v.tree.setWeight(i, w)
		if at := nextWarmChange(e, w, nowMs); at > 0 {
			v.warm.push(at, int32(i))
		}
	}
}

// nextWarmChange returns the first unix ms after nowMs at which the
// warm-up weight of e, w at nowMs, changes; 0 when it no longer changes.
// The weight is max(1, uptime×weight/warmup) for an uptime below the
// warm-up (so it rises by one at each multiple of warmup/weight) and the
// full weight after.
func nextWarmChange(e *entry, w, nowMs int64) int64 {
	if e.weight <= 0 || e.startMs <= 0 || e.warmupMs <= 0 || w >= e.weight {
		return 0
	}
	up := (w+1)*e.warmupMs/e.weight + min(1, (w+1)*e.warmupMs%e.weight) // ceil
	return e.startMs + min(up, e.warmupMs)
}

// methodStates returns the number of service-method states held (tests).
func (b *RoundRobinBalancer) methodStates() int { return b.methods.len() }
