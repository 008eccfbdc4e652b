package loadbalance

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

// rrRef is the O(n) smooth weighted round robin the tree replaced: every
// provider's weight added to its current value on every pick, state keyed
// by provider identity across lists. With passes, an excluded provider
// whose turn comes is charged it and the round repeated (up to maxPasses;
// then that pick and the list's next n sit the excluded out), as
// RoundRobinBalancer does; without, excluded providers sit out.
type rrRef struct {
	cur    map[string]int64
	next   int
	passes bool
	heavy  map[*snapshot]int // picks left to sit the excluded out, per list
}

func (r *rrRef) pick(s *snapshot, nowMs int64, ex Exclude) (int, error) {
	if r.passes && r.heavy[s] > 0 {
		r.heavy[s]--
		return r.scan(s, nowMs, ex)
	}
	if r.passes {
		anyWeight := false
		for i := range s.entries {
			anyWeight = anyWeight || s.entries[i].weight > 0
		}
		if anyWeight {
			for range maxPasses {
				i, _ := r.scan(s, nowMs, nil)
				if !excluded(ex, i) {
					return i, nil
				}
			}
			r.heavy[s] = len(s.entries)
		}
	}
	return r.scan(s, nowMs, ex)
}

func (r *rrRef) scan(s *snapshot, nowMs int64, ex Exclude) (int, error) {
	warming := s.warming(nowMs)
	var total int64
	best, left := -1, 0
	for i := range s.entries {
		if excluded(ex, i) {
			continue
		}
		left++
		w := s.weightAt(i, nowMs, warming)
		if w <= 0 {
			continue
		}
		k := s.entries[i].key
		r.cur[k] += w
		total += w
		if best < 0 || r.cur[k] > r.cur[s.entries[best].key] {
			best = i
		}
	}
	if best >= 0 {
		r.cur[s.entries[best].key] -= total
		return best, nil
	}
	if left == 0 {
		return 0, ErrNoInvokers
	}
	for range s.entries {
		r.next = (r.next + 1) % len(s.entries)
		if !excluded(ex, r.next) {
			return r.next, nil
		}
	}
	return 0, ErrNoInvokers
}

type exSet map[int]bool

func (e exSet) Excluded(i int) bool { return e[i] }

// TestRoundRobinTreeMatchesScan drives the balancer and the O(n) reference
// with the same random weights (zeros, warm-ups of a few seconds, starts
// in the future), several lists of one method sharing state (subsets,
// permutations, relists as new invokers; in a quarter of the cases taking
// turns every other pick, which sends them to the scan and back), a clock
// moving by random steps and random excluded sets, and requires every pick
// to be the same provider.
func TestRoundRobinTreeMatchesScan(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			if seed%5 == 4 { // rebuild the trees every few rounds
				old := rrRebase
				rrRebase = int64(3 + seed)
				t.Cleanup(func() { rrRebase = old })
			}
			c := newClock()
			lb := NewRoundRobin(Options{Now: c.now})
			withEx := seed%2 == 1
			ref := &rrRef{cur: map[string]int64{}, passes: withEx, heavy: map[*snapshot]int{}}
			n := 1 + rng.IntN([]int{3, 20, 300}[seed%3])
			all := make([]protocol.Invoker, n)
			for i := range all {
				w := rng.IntN(200) + 1
				switch rng.IntN(6) {
				case 0:
					w = 0
				case 1:
					w = 1 + rng.IntN(3)
				}
				var extra map[string]string
				if rng.IntN(3) == 0 { // warming up over a few seconds
					start := c.now().Add(time.Duration(rng.IntN(4000)-1000) * time.Millisecond)
					extra = map[string]string{
						protocol.KeyTimestamp: strconv.FormatInt(start.UnixMilli(), 10),
						protocol.KeyWarmup:    strconv.Itoa(500 + rng.IntN(5000)),
					}
				}
				all[i] = provider(i, w, extra)
			}
			lists := [][]protocol.Invoker{all}
			for range 3 {
				perm := rng.Perm(n)
				l := make([]protocol.Invoker, 0, n)
				for _, j := range perm[:1+rng.IntN(n)] {
					l = append(l, all[j])
				}
				lists = append(lists, l)
			}
			// the same providers as new invokers, as a directory relists them
			again := make([]protocol.Invoker, n)
			for i, p := range all {
				again[i] = &fake{u: p.URL(), name: p.(*fake).name}
			}
			lists = append(lists, again)
			pickers := make([]Picker, len(lists))
			snaps := make([]*snapshot, len(lists))
			for i, l := range lists {
				pickers[i] = lb.Build(l)
				snaps[i] = buildSnapshot(l, nil)
			}
			li := 0
			switchOdds := []int{50, 50, 50, 2}[seed%4] // some take turns all the time
			for step := range 3000 {
				if rng.IntN(switchOdds) == 0 {
					li = rng.IntN(len(lists))
				}
				if rng.IntN(4) == 0 {
					c.add(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
				var ex Exclude
				if withEx && rng.IntN(3) == 0 {
					set := exSet{}
					for range rng.IntN(len(lists[li]) + 1) {
						set[rng.IntN(len(lists[li]))] = true
					}
					ex = set
				}
				inv := call("m")
				want, werr := ref.pick(snaps[li], c.now().UnixMilli(), ex)
				got, gerr := pickers[li].Pick(inv, ex)
				require.Equal(t, werr, gerr, "step %d list %d", step, li)
				require.Equal(t, name(lists[li][want]), name(lists[li][got]), "step %d list %d", step, li)
			}
		})
	}
}

// TestRoundRobinSkipsExcludedByWeight checks that a provider excluded on
// every pick (down) gets no call and the others share its turns by
// weight, and that it comes back without a burst.
func TestRoundRobinSkipsExcludedByWeight(t *testing.T) {
	lb := NewRoundRobin(Options{})
	invs := providers(1, 2, 3, 4)
	p := lb.Build(invs)
	counts := make([]int, len(invs))
	down := exSet{3: true}
	for range 600 {
		i, err := p.Pick(call("m"), down)
		require.NoError(t, err)
		counts[i]++
	}
	require.Equal(t, []int{100, 200, 300, 0}, counts)
	counts = make([]int, len(invs))
	for range 10 { // one cycle: D back at its share, not more
		i, err := p.Pick(call("m"), nil)
		require.NoError(t, err)
		counts[i]++
	}
	require.Equal(t, []int{1, 2, 3, 4}, counts)
	_, err := p.Pick(call("m"), exSet{0: true, 1: true, 2: true, 3: true})
	require.ErrorIs(t, err, ErrNoInvokers)
}

// TestRRTreeOvertakes checks the tree's answer against the plain maximum
// through many rounds of lines crossing.
func TestRRTreeOvertakes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 64, 100} {
		var tr rrTree
		tr.reset(n)
		for i := range n {
			tr.base[i], tr.w[i] = int64(rng.IntN(1000)-500), int64(rng.IntN(20))
		}
		tr.build()
		for r := range 2000 {
			tr.advance()
			want := -1
			for i := range n {
				if tr.w[i] > 0 && (want < 0 || tr.value(i) > tr.value(want)) {
					want = i
				}
			}
			require.Equal(t, want, tr.best(), fmt.Sprintf("n %d round %d", n, r))
			switch {
			case want >= 0 && r%3 != 0:
				tr.charge(want, int64(rng.IntN(3000)))
			case r%7 == 0:
				tr.setWeight(rng.IntN(n), int64(rng.IntN(20)))
			}
		}
	}
}
