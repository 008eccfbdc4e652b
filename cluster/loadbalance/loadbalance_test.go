package loadbalance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

func TestTable(t *testing.T) {
	tb := Builtin()
	assert.Equal(t, []string{"consistenthash", "leastactive", "p2c", "random", "roundrobin", "shortestresponse"}, tb.Names())
	_, err := tb.New("rr")
	require.EqualError(t, err, `loadbalance: unknown "rr" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`)
	lb, err := tb.New("")
	require.NoError(t, err)
	assert.IsType(t, &RandomBalancer{}, lb)
	require.Error(t, tb.Register("", func(Options) LoadBalance { return NewRandom(Options{}) }))
	require.Error(t, tb.Register("mine", nil))
	require.EqualError(t, tb.Register(Random, func(Options) LoadBalance { return nil }), `loadbalance: register "random": name already taken`)
	require.NoError(t, tb.Register("first", func(Options) LoadBalance { return firstBalancer{} }))
	lb, err = tb.New("first")
	require.NoError(t, err)
	got, err := Select(lb, providers(1, 1), call("m"))
	require.NoError(t, err)
	assert.Equal(t, "A", name(got))
	// an independent table does not see it
	_, err = Builtin().New("first")
	require.Error(t, err)
}

type firstBalancer struct{}

func (firstBalancer) Build([]protocol.Invoker) Picker { return firstBalancer{} }

func (firstBalancer) Pick(*protocol.Invocation, Exclude) (int, error) { return 0, nil }

func TestEmptyList(t *testing.T) {
	for _, n := range Builtin().Names() {
		lb, err := Builtin().New(n)
		require.NoError(t, err)
		_, err = Select(lb, nil, call("m"))
		assert.ErrorIs(t, err, ErrNoInvokers, n)
		got, err := Select(lb, providers(7), call("m"))
		require.NoError(t, err)
		assert.Equal(t, "A", name(got), n)
	}
}

func TestWeightWarmup(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := strconv.FormatInt(start.UnixMilli(), 10)
	u := func(w string, warm string) *protocol.URL {
		p := map[string]string{protocol.KeyWeight: w, protocol.KeyTimestamp: ts}
		if warm != "" {
			p[protocol.KeyWarmup] = warm
		}
		return protocol.NewURL("dubbo", "h", 1, "s", p)
	}
	for _, tc := range []struct {
		name   string
		u      *protocol.URL
		uptime time.Duration
		want   int
	}{
		{"no timestamp", protocol.NewURL("dubbo", "h", 1, "s", nil), 0, 100},
		{"just started", u("100", ""), 0, 1},
		{"clock skew", u("100", ""), -time.Minute, 1},
		{"one minute of ten", u("100", ""), time.Minute, 10},
		{"half way", u("100", ""), 5 * time.Minute, 50},
		{"almost", u("100", ""), 10*time.Minute - time.Millisecond, 99},
		{"warm", u("100", ""), 10 * time.Minute, 100},
		{"long warm", u("100", ""), 24 * time.Hour, 100},
		{"small weight early", u("5", ""), time.Second, 1},
		{"custom warmup", u("200", "1000"), 500 * time.Millisecond, 100},
		{"zero weight stays zero", u("0", ""), time.Minute, 0},
		{"warmup 0 disables", u("100", "0"), 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Weight(tc.u, start.Add(tc.uptime)))
		})
	}
}

func seq(t *testing.T, lb LoadBalance, invs []protocol.Invoker, inv *protocol.Invocation, n int) string {
	t.Helper()
	var b strings.Builder
	for range n {
		got, err := Select(lb, invs, inv)
		require.NoError(t, err)
		b.WriteString(name(got))
	}
	return b.String()
}

func TestRoundRobinSequences(t *testing.T) {
	for _, tc := range []struct {
		weights []int
		want    string
	}{
		{[]int{5, 1, 1}, "AABACAA" + "AABACAA"},
		{[]int{1, 2, 3}, "CBACBC" + "CBACBC"},
		{[]int{1, 1, 1}, "ABCABCABC"},
		{[]int{100, 100}, "ABABAB"},
		{[]int{2, 0, 1}, "ACAACA"},
		{[]int{0, 0, 0}, "BCABCA"},
		{[]int{3}, "AAA"},
	} {
		t.Run(fmt.Sprint(tc.weights), func(t *testing.T) {
			lb := NewRoundRobin(Options{})
			assert.Equal(t, tc.want, seq(t, lb, providers(tc.weights...), call("m"), len(tc.want)))
		})
	}
}

func TestRoundRobinStatePerMethod(t *testing.T) {
	lb := NewRoundRobin(Options{})
	invs := providers(5, 1, 1)
	var a, b strings.Builder
	for range 7 {
		x, _ := Select(lb, invs, call("a"))
		y, _ := Select(lb, invs, call("b"))
		a.WriteString(name(x))
		b.WriteString(name(y))
	}
	assert.Equal(t, "AABACAA", a.String())
	assert.Equal(t, "AABACAA", b.String())
	assert.Equal(t, 2, lb.methodStates())
}

func TestRoundRobinKeepsStateAcrossRelist(t *testing.T) {
	lb := NewRoundRobin(Options{})
	invs := providers(5, 1, 1)
	assert.Equal(t, "AAB", seq(t, lb, invs, call("m"), 3))
	// the directory re-lists the same providers as new invokers, in another order
	relisted := []protocol.Invoker{provider(2, 1, nil), provider(0, 5, nil), provider(1, 1, nil)}
	assert.Equal(t, "ACAA", seq(t, lb, relisted, call("m"), 4))
}

func TestRoundRobinRecyclesDepartedProviders(t *testing.T) {
	c := newClock()
	lb := NewRoundRobin(Options{Now: c.now})
	all := providers(1, 1, 1, 1)
	seq(t, lb, all, call("m"), 4)
	st := lb.methods.get(call("m"), c.now().UnixMilli())
	assert.Len(t, st.byKey, 4)
	// two providers leave; their state is kept for RecyclePeriod, then dropped
	seq(t, lb, all[:2:2], call("m"), 2)
	assert.Len(t, st.byKey, 4)
	c.add(RecyclePeriod + time.Second)
	seq(t, lb, all[:3:3], call("m"), 1) // D left more than a period ago
	assert.Len(t, st.byKey, 3)
	seq(t, lb, all[1:2:2], call("m"), 1)
	c.add(RecyclePeriod + time.Second)
	seq(t, lb, all[1:3:3], call("m"), 1) // A left more than a period ago
	assert.Len(t, st.byKey, 2)
	assert.Contains(t, st.byKey, identity(all[1].URL()))
	assert.Contains(t, st.byKey, identity(all[2].URL()))
}

func TestPerMethodStateIsBounded(t *testing.T) {
	c := newClock()
	lb := NewRoundRobin(Options{Now: c.now})
	invs := providers(1, 1)
	for i := range 1000 {
		seq(t, lb, invs, call("m"+strconv.Itoa(i)), 1)
		c.add(time.Second)
	}
	// keys idle for more than RecyclePeriod were dropped
	assert.LessOrEqual(t, lb.methodStates(), 2*int(RecyclePeriod/time.Second)+2)
}

func TestRoundRobinWarmupDoesNotReset(t *testing.T) {
	c := newClock()
	lb := NewRoundRobin(Options{Now: c.now})
	// B started 5 minutes ago: effective weight 50 of 100, growing each call
	start := strconv.FormatInt(c.now().Add(-5*time.Minute).UnixMilli(), 10)
	invs := []protocol.Invoker{provider(0, 100, nil), provider(1, 100, map[string]string{protocol.KeyTimestamp: start})}
	counts := map[string]int{}
	for range 3000 {
		got, _ := Select(lb, invs, call("m"))
		counts[name(got)]++
		c.add(100 * time.Millisecond) // 3000 calls span the remaining 5 minutes
	}
	// B's weight rises linearly from 50 to 100: about 3/7 of the calls
	// while warming instead of being reset to a burst at each change
	assert.InDelta(t, 3000*(75.0/175.0), counts["B"], 60, "%v", counts)
}

func TestRandomChiSquare(t *testing.T) {
	for _, tc := range []struct {
		weights []int
	}{
		{[]int{1, 2, 3, 4}},
		{[]int{10, 0, 30, 60}},
		{[]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{[]int{0, 5, 0}},
		{[]int{7, 1, 9, 3, 5, 2, 8, 4}},
	} {
		t.Run(fmt.Sprint(tc.weights), func(t *testing.T) {
			lb := NewRandom(Options{Seed: 42})
			invs := providers(tc.weights...)
			probs, df := weightProbs(tc.weights)
			counts := pickCounts(t, lb, invs, 100_000)
			x := chiSquare(t, counts, probs)
			if df == 0 {
				return
			}
			t.Logf("chi-square %.2f (critical %.3f at p=0.001, %d df), counts %v", x, chiCritical001[df], df, counts)
			assert.Less(t, x, chiCritical001[df], "chi-square %.2f with %d df, counts %v", x, df, counts)
		})
	}
}

func TestAllZeroWeightsIsUniform(t *testing.T) {
	lb := NewRandom(Options{Seed: 7})
	counts := pickCounts(t, lb, providers(0, 0, 0, 0), 100_000)
	x := chiSquare(t, counts, []float64{.25, .25, .25, .25})
	assert.Less(t, x, chiCritical001[3])
}

func TestRandomWarmupChiSquare(t *testing.T) {
	c := newClock()
	lb := NewRandom(Options{Seed: 3, Now: c.now})
	// B started 1 minute ago (weight 10 of 100), C 5 minutes ago (50)
	ts := func(d time.Duration) map[string]string {
		return map[string]string{protocol.KeyTimestamp: strconv.FormatInt(c.now().Add(-d).UnixMilli(), 10)}
	}
	invs := []protocol.Invoker{provider(0, 100, nil), provider(1, 100, ts(time.Minute)), provider(2, 100, ts(5*time.Minute))}
	counts := pickCounts(t, lb, invs, 100_000)
	x := chiSquare(t, counts, []float64{100.0 / 160, 10.0 / 160, 50.0 / 160})
	assert.Less(t, x, chiCritical001[2], "counts %v", counts)
	// after warm-up the weights are equal
	c.add(10 * time.Minute)
	counts = pickCounts(t, lb, invs, 100_000)
	x = chiSquare(t, counts, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
	assert.Less(t, x, chiCritical001[2], "counts %v", counts)
}

// Random and least-active picks read the clock only while a provider
// may be warming up and there is more than one provider to choose from:
// not for a list of one, not for providers without a start time, and not
// after a pick saw the warm-up over.
func TestPicksReadTheClockOnlyWhileWarming(t *testing.T) {
	c := newClock()
	var reads atomic.Int64
	now := func() time.Time { reads.Add(1); return c.now() }
	started := map[string]string{protocol.KeyTimestamp: strconv.FormatInt(c.now().Add(-time.Minute).UnixMilli(), 10)}
	for _, lb := range []LoadBalance{NewRandom(Options{Seed: 1, Now: now}), NewLeastActive(Options{Seed: 1, Now: now})} {
		c.ns.Store(newClock().ns.Load())
		reads.Store(0)
		pick := func(p Picker, ex Exclude) int {
			i, err := p.Pick(call("m"), ex)
			require.NoError(t, err)
			return i
		}
		if _, ok := lb.(*RandomBalancer); ok {
			one := lb.Build([]protocol.Invoker{provider(0, 100, started)})
			for range 10 {
				require.Equal(t, 0, pick(one, excludeSet{}))
			}
			_, err := one.Pick(call("m"), excludeSet{0: true})
			require.ErrorIs(t, err, ErrNoInvokers)
			require.Zero(t, reads.Load(), "one provider: no clock read")
		}
		plain := lb.Build(providers(100, 100))
		reads.Store(0) // building may look statistics up, with the time
		for range 10 {
			pick(plain, excludeSet{})
		}
		require.Zero(t, reads.Load(), "no start times: no clock read")

		warm := lb.Build([]protocol.Invoker{provider(0, 100, nil), provider(1, 100, started)})
		reads.Store(0)
		for range 10 {
			pick(warm, excludeSet{})
		}
		require.Equal(t, int64(10), reads.Load(), "warming: one read per pick")
		c.add(10 * time.Minute)
		reads.Store(0)
		counts := [2]int{}
		for range 1000 {
			counts[pick(warm, excludeSet{})]++
		}
		require.Equal(t, int64(1), reads.Load(), "the first pick after the warm-up saw it over")
		require.Greater(t, counts[1], 350, "full weight after the warm-up: %v", counts)
		require.Equal(t, 0, pick(warm, excludeSet{1: true}))
	}
}

func weightProbs(weights []int) ([]float64, int) {
	total := 0
	for _, w := range weights {
		total += w
	}
	probs := make([]float64, len(weights))
	df := -1
	for i, w := range weights {
		probs[i] = float64(w) / float64(total)
		if w > 0 {
			df++
		}
	}
	return probs, df
}

// pickCounts counts n picks of one picker built from invs, as the cluster
// invoker picks: Build once per list, Pick per call. (Select builds a
// picker per pick, which was 95% of these tests' time under -race.)
func pickCounts(t *testing.T, lb LoadBalance, invs []protocol.Invoker, n int) []int {
	t.Helper()
	p := lb.Build(invs)
	counts := make([]int, len(invs))
	inv := call("m")
	for range n {
		i, err := p.Pick(inv, nil)
		if err != nil {
			t.Fatal(err)
		}
		counts[i]++
	}
	return counts
}

func TestLeastActive(t *testing.T) {
	lb := NewLeastActive(Options{Seed: 1})
	invs := providers(100, 100, 100)
	set := func(a ...int64) {
		for i, n := range a {
			lb.Stats().For(invs[i]).SetActive(n)
		}
	}
	set(3, 0, 1)
	assert.Equal(t, "BBBBB", seq(t, lb, invs, call("m"), 5))
	set(3, 2, 1)
	assert.Equal(t, "CCCCC", seq(t, lb, invs, call("m"), 5))
	// ties among the least active are broken by weighted random
	lb2 := NewLeastActive(Options{Seed: 9})
	invs = providers(100, 300, 100, 50)
	lb2.Stats().For(invs[2]).SetActive(1)
	counts := pickCounts(t, lb2, invs, 100_000)
	x := chiSquare(t, counts, []float64{100.0 / 450, 300.0 / 450, 0, 50.0 / 450})
	assert.Less(t, x, chiCritical001[2], "counts %v", counts)
	// weight 0 is never chosen, even when idle
	invs = providers(0, 100)
	lb3 := NewLeastActive(Options{})
	lb3.Stats().For(invs[1]).SetActive(10)
	assert.Equal(t, "BBB", seq(t, lb3, invs, call("m"), 3))
}

func TestLeastActiveCountsFromBeginEnd(t *testing.T) {
	lb := NewLeastActive(Options{})
	invs := providers(1, 1)
	now := time.Now()
	// calls in flight on A: the next picks go to B until A finishes
	lb.Stats().For(invs[0]).Begin(now)
	lb.Stats().For(invs[0]).Begin(now)
	assert.Equal(t, "BBB", seq(t, lb, invs, call("m"), 3))
	lb.Stats().For(invs[1]).Begin(now)
	lb.Stats().For(invs[1]).Begin(now)
	lb.Stats().For(invs[1]).Begin(now)
	assert.Equal(t, "AAA", seq(t, lb, invs, call("m"), 3))
	// statistics are keyed by provider identity: a re-listed directory sees them
	relisted := providers(1, 1)
	assert.Equal(t, int64(3), lb.Stats().For(relisted[1]).Active())
	assert.Equal(t, "AAA", seq(t, lb, relisted, call("m"), 3))
}

func TestStatsRecycled(t *testing.T) {
	c := newClock()
	s := NewStats(c.now)
	for i := range 100 {
		inv := provider(i, 1, nil)
		s.For(inv).Begin(c.now())
		s.For(inv).End(c.now(), time.Millisecond, false)
		c.add(2 * time.Second)
	}
	assert.LessOrEqual(t, s.Len(), 2*30+1) // used within two periods at most
	busy := provider(500, 1, nil)
	s.For(busy).Begin(c.now()) // in flight: never recycled
	c.add(10 * RecyclePeriod)
	s.For(provider(501, 1, nil))
	assert.Equal(t, 2, s.Len())
	assert.Equal(t, int64(1), s.For(busy).Active())
}

func TestShortestResponse(t *testing.T) {
	c := newClock()
	lb := NewShortestResponse(Options{Seed: 1, Now: c.now})
	invs := providers(100, 100, 100)
	obs := func(i int, d time.Duration, active int64) {
		st := lb.Stats().For(invs[i])
		st.Begin(c.now())
		st.End(c.now(), d, false)
		st.SetActive(active)
	}
	obs(0, 10*time.Millisecond, 0)
	obs(1, 2*time.Millisecond, 0)
	obs(2, 5*time.Millisecond, 0)
	assert.Equal(t, "BBB", seq(t, lb, invs, call("m"), 3))
	// B has 4 in flight: 2ms*5 = 10ms > C's 5ms
	lb.Stats().For(invs[1]).SetActive(4)
	assert.Equal(t, "CCC", seq(t, lb, invs, call("m"), 3))
	// after the probe period all response times are forgotten: weighted random
	c.add(time.Minute)
	lb.Stats().For(invs[1]).SetActive(0)
	counts := pickCounts(t, lb, invs, 30_000)
	for _, n := range counts {
		assert.InDelta(t, 10_000, n, 600, "%v", counts)
	}
}

func TestP2CAvoidsSlow(t *testing.T) {
	c := newClock()
	lb := NewP2C(Options{Seed: 5, Now: c.now})
	invs := providers(100, 100, 100, 100)
	for i, d := range []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, 100 * time.Millisecond} {
		st := lb.Stats().For(invs[i])
		st.Begin(c.now())
		st.End(c.now(), d, false)
	}
	counts := pickCounts(t, lb, invs, 10_000)
	// D is chosen only when it is not drawn with another provider: never
	assert.Equal(t, 0, counts[3], "%v", counts)
	for _, n := range counts[:3] {
		assert.InDelta(t, 3333, n, 300, "%v", counts)
	}
	// once the probe period passed without answers, D is probed exactly once
	c.add(6 * time.Second)
	for i := range 3 {
		st := lb.Stats().For(invs[i])
		st.Begin(c.now())
		st.End(c.now(), time.Millisecond, false)
	}
	counts = pickCounts(t, lb, invs, 10_000)
	assert.Equal(t, 1, counts[3], "%v", counts)
}

func TestConsistentHashSpreadAndRemap(t *testing.T) {
	lb := NewConsistentHash(Options{})
	const n, keys = 10, 100_000
	invs := providers(make([]int, n)...)
	owner := make([]string, keys)
	counts := map[string]int{}
	p := lb.Build(invs) // once per list, as the cluster invoker does
	for k := range keys {
		i, err := p.Pick(call("get", "user-"+strconv.Itoa(k)), nil)
		if err != nil {
			t.Fatal(err)
		}
		owner[k] = name(invs[i])
		counts[owner[k]]++
	}
	require.Len(t, counts, n)
	rsd := relStdDev(counts, keys, n)
	t.Logf("160 vnodes over %d providers: relative std dev of keys per provider %.1f%%, counts %v", n, 100*rsd, counts)
	assert.Less(t, rsd, 0.10)

	// remove E: only E's keys move, about 1/N of them
	without := append(append([]protocol.Invoker{}, invs[:4]...), invs[5:]...)
	moved := 0
	p = lb.Build(without)
	for k := range keys {
		i, err := p.Pick(call("get", "user-"+strconv.Itoa(k)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := without[i]; name(got) != owner[k] {
			moved++
			if owner[k] != "E" {
				t.Fatalf("key %d moved from %s, not from the removed E", k, owner[k])
			}
		}
	}
	frac := float64(moved) / keys
	t.Logf("removing 1 of %d moved %.3f of the keys", n, frac)
	assert.InDelta(t, 1.0/n, frac, 0.03)
}

func relStdDev(counts map[string]int, keys, n int) float64 {
	mean := float64(keys) / float64(n)
	var ss float64
	for _, c := range counts {
		ss += (float64(c) - mean) * (float64(c) - mean)
	}
	return math.Sqrt(ss/float64(n)) / mean
}

func TestConsistentHashOrderIndependentAndRebuildOnlyOnChange(t *testing.T) {
	lb := NewConsistentHash(Options{})
	invs := providers(1, 1, 1, 1, 1)
	first := map[string]string{}
	for k := range 200 {
		got, _ := Select(lb, invs, call("get", k))
		first[strconv.Itoa(k)] = name(got)
	}
	assert.Equal(t, int64(1), lb.RingBuilds())
	// the same set, re-listed in a shuffled order as new invokers: same mapping, no rebuild
	shuffled := providers(1, 1, 1, 1, 1)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for k := range 200 {
		got, _ := Select(lb, shuffled, call("get", k))
		assert.Equal(t, first[strconv.Itoa(k)], name(got))
	}
	// another method over the same set shares the ring
	Select(lb, shuffled, call("other", 1))
	assert.Equal(t, int64(1), lb.RingBuilds())
	// a different set rebuilds once
	Select(lb, invs[:4:4], call("get", 1))
	Select(lb, invs[:4:4], call("get", 2))
	assert.Equal(t, int64(2), lb.RingBuilds())
	// a fresh balancer in "another process" maps the same way
	other := NewConsistentHash(Options{})
	for k := range 200 {
		got, _ := Select(other, shuffled, call("get", k))
		assert.Equal(t, first[strconv.Itoa(k)], name(got))
	}
}

func TestConsistentHashWrapAround(t *testing.T) {
	r := buildRing([]string{"a:1", "b:1", "c:1"}, 8)
	require.Len(t, r.points, 24)
	last := r.points[len(r.points)-1]
	require.Less(t, last, uint32(math.MaxUint32))
	assert.Equal(t, r.owners[0], r.lookup(math.MaxUint32), "past the last point wraps to the first")
	assert.Equal(t, r.owners[len(r.points)-1], r.lookup(last), "a point maps to itself")
	assert.Equal(t, r.owners[0], r.lookup(0))
	assert.Equal(t, r.owners[1], r.lookup(r.points[0]+1))
}

func TestConsistentHashKeys(t *testing.T) {
	invs := providers(1, 1, 1, 1, 1, 1, 1, 1)
	// the key is the first argument by default: other arguments do not matter
	lb := NewConsistentHash(Options{})
	a, _ := Select(lb, invs, call("get", "k1", 1))
	for i := range 20 {
		b, _ := Select(lb, invs, call("get", "k1", i))
		assert.Same(t, a, b)
	}
	// chosen arguments
	lb2 := NewConsistentHash(Options{HashArguments: []int{1}})
	spread := map[string]bool{}
	for i := range 50 {
		b, _ := Select(lb2, invs, call("get", "k1", i))
		spread[name(b)] = true
	}
	assert.Greater(t, len(spread), 4)
	// client-address hashing from an attachment
	lb3 := NewConsistentHash(Options{HashAttachment: "client.address"})
	inv := call("get", "x")
	inv.Attachments = map[string]string{"client.address": "192.168.1.7"}
	c, _ := Select(lb3, invs, inv)
	for i := range 20 {
		inv := call("get", i)
		inv.Attachments = map[string]string{"client.address": "192.168.1.7"}
		d, _ := Select(lb3, invs, inv)
		assert.Same(t, c, d)
	}
	// no arguments at all still selects
	_, err := Select(lb, invs, call("none"))
	require.NoError(t, err)
	_, err = Select(lb, invs, nil)
	require.NoError(t, err)
}

// TestConcurrentSelectWhileListChanges hammers every balancer from 64
// goroutines while the provider list keeps changing under them: every
// goroutine puts another list in place every 8th pick, so the changes go
// on until the last picks, and the picks saw every list; run with -race.
func TestConcurrentSelectWhileListChanges(t *testing.T) {
	lists := [][]protocol.Invoker{providers(5, 1, 1), providers(1, 2, 3, 4), providers(3, 3), providers(1, 0, 1, 0, 9)}
	const goroutines, picks = 64, 100
	for _, algo := range Builtin().Names() {
		t.Run(algo, func(t *testing.T) {
			lb, err := Builtin().New(algo)
			require.NoError(t, err)
			var cur atomic.Pointer[[]protocol.Invoker]
			cur.Store(&lists[0])
			var wg sync.WaitGroup
			var done atomic.Int64
			var seen [4]atomic.Int64 // picks from each list
			for g := range goroutines {
				wg.Go(func() {
					inv := call("m"+strconv.Itoa(g%3), "key"+strconv.Itoa(g))
					for i := range picks {
						if i%8 == g%8 {
							cur.Store(&lists[(g+i/8)%len(lists)])
						}
						lp := cur.Load()
						l := *lp
						got, err := Select(lb, l, inv)
						if err != nil {
							t.Error(err)
							return
						}
						if !contains(l, got) {
							t.Errorf("picked %s outside the list", name(got))
							return
						}
						if su, ok := lb.(StatsUser); ok {
							st := su.Stats().For(got)
							st.Begin(time.Now())
							st.End(time.Now(), time.Microsecond, false)
						}
						for k := range lists {
							if lp == &lists[k] {
								seen[k].Add(1)
							}
						}
						done.Add(1)
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(goroutines*picks), done.Load())
			counts := []int64{seen[0].Load(), seen[1].Load(), seen[2].Load(), seen[3].Load()}
			for k, n := range counts {
				assert.Positive(t, n, "no pick saw list %d; picks per list %v", k, counts)
			}
		})
	}
}

// TestRoundRobinConcurrentExact checks that concurrent callers never skew
// smooth weighted round robin: over whole cycles the counts are exact.
func TestRoundRobinConcurrentExact(t *testing.T) {
	lb := NewRoundRobin(Options{})
	invs := providers(5, 1, 1)
	var a, b, c atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 7 * 50 {
				got, _ := Select(lb, invs, call("m"))
				switch name(got) {
				case "A":
					a.Add(1)
				case "B":
					b.Add(1)
				case "C":
					c.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, []int64{64 * 250, 64 * 50, 64 * 50}, []int64{a.Load(), b.Load(), c.Load()})
}

func contains(l []protocol.Invoker, x protocol.Invoker) bool {
	for _, i := range l {
		if i == x {
			return true
		}
	}
	return false
}

func TestErrNoInvokersIsSentinel(t *testing.T) {
	_, err := Select(NewRandom(Options{}), []protocol.Invoker{}, call("m"))
	assert.True(t, errors.Is(err, ErrNoInvokers))
}

func TestOptionsFromURL(t *testing.T) {
	u := protocol.NewURL("consumer", "h", 0, "s", map[string]string{
		KeyHashNodes: "320", KeyHashArguments: "1, 2", KeyHashAttachment: "client.address"})
	opts, err := OptionsFromURL(u)
	require.NoError(t, err)
	lb, err := Builtin().New(ConsistentHash, opts...)
	require.NoError(t, err)
	ch := lb.(*ConsistentHashBalancer)
	assert.Equal(t, 320, ch.vnodes)
	assert.Equal(t, []int{1, 2}, ch.args)
	assert.Equal(t, "client.address", ch.attachment)
	for k, v := range map[string]string{KeyHashNodes: "many", KeyHashArguments: "a,b"} {
		_, err := OptionsFromURL(protocol.NewURL("consumer", "h", 0, "s", map[string]string{k: v}))
		assert.ErrorContains(t, err, k, v)
	}
}
