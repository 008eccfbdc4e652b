package loadbalance

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// excludeSet excludes the indexes it holds.
type excludeSet map[int]bool

func (e excludeSet) Excluded(i int) bool { return e[i] }

// The indexed least-active pick chooses what the scan may choose: a
// provider not excluded, of positive weight unless only weight 0 is left,
// whose count is the lowest among those; through churn of the counts
// (Begin, End, SetActive; sometimes more changes than the change log
// holds), excluded sets, and lists of every size around indexMin.
func TestLeastActiveIndexAgreesWithScan(t *testing.T) {
	for _, n := range []int{indexMin - 1, indexMin, 300, 1000} {
		lb := NewLeastActive(Options{Seed: uint64(n)})
		weights := make([]int, n)
		for i := range weights {
			weights[i] = []int{0, 50, 100, 150}[i%4]
		}
		invs := providers(weights...)
		p := lb.Build(invs).(*leastActivePicker)
		require.Equal(t, n >= indexMin, p.ix != nil, "index from %d providers", indexMin)
		stats := make([]*Stat, n)
		for i, inv := range invs {
			stats[i] = lb.Stats().For(inv)
		}
		r := rand.New(rand.NewPCG(1, uint64(n)))
		now := time.Now()
		for round := range 3000 {
			changes := r.IntN(4)
			if round%500 == 0 {
				changes = logSize + 10 // the log overflows
			}
			for range changes {
				st := stats[r.IntN(n)]
				switch {
				case r.IntN(3) == 0:
					st.SetActive(int64(r.IntN(3)))
				case st.Active() > 0:
					st.End(now, time.Millisecond, false)
				default:
					st.Begin(now)
				}
			}
			ex := excludeSet{}
			switch round % 5 {
			case 1: // a few, at random
				for range 3 {
					ex[r.IntN(n)] = true
				}
			case 2: // every provider at the lowest count but one
				low := int64(1 << 62)
				for i, st := range stats {
					if weights[i] > 0 {
						low = min(low, st.Active())
					}
				}
				for i, st := range stats {
					if weights[i] > 0 && st.Active() == low {
						ex[i] = true
					}
				}
			case 3: // every provider of positive weight
				for i := range stats {
					ex[i] = weights[i] > 0
				}
			}
			got, err := p.Pick(call("m"), ex)
			require.NoError(t, err)
			require.False(t, ex[got], "round %d: picked excluded %d", round, got)
			positiveLeft := false
			low := int64(1 << 62)
			for i, st := range stats {
				if !ex[i] && weights[i] > 0 {
					positiveLeft = true
					low = min(low, st.Active())
				}
			}
			if !positiveLeft {
				require.Zero(t, weights[got], "round %d: only weight 0 is left", round)
				continue
			}
			require.Positive(t, weights[got], "round %d", round)
			require.Equal(t, low, stats[got].Active(), "round %d: picked %d with %d in flight, lowest %d", round, got, stats[got].Active(), low)
		}
		if p.ix != nil {
			require.Equal(t, lb.Stats().log.seq.Load(), p.ix.seq, "the picks went through the index")
		}
	}
}

// Ties at the lowest count are broken by weight through the index too,
// with excluded providers left out.
func TestLeastActiveIndexTiesByWeight(t *testing.T) {
	lb := NewLeastActive(Options{Seed: 5})
	weights := make([]int, 200)
	for i := range weights {
		weights[i] = 100
	}
	low := map[int]int{7: 100, 70: 300, 140: 100, 199: 50, 100: 200}
	for i, w := range low {
		weights[i] = w
	}
	invs := providers(weights...)
	for i, inv := range invs {
		if _, ok := low[i]; !ok {
			lb.Stats().For(inv).SetActive(1)
		}
	}
	p := lb.Build(invs)
	require.NotNil(t, p.(*leastActivePicker).ix)
	counts := make([]int, len(invs))
	ex := excludeSet{100: true}
	for range 100_000 {
		i, err := p.Pick(call("m"), ex)
		require.NoError(t, err)
		counts[i]++
	}
	got := []int{counts[7], counts[70], counts[140], counts[199]}
	x := chiSquare(t, got, []float64{100.0 / 550, 300.0 / 550, 100.0 / 550, 50.0 / 550})
	assert.Less(t, x, chiCritical001[3], "counts %v", got)
	assert.Equal(t, 100_000, counts[7]+counts[70]+counts[140]+counts[199])
}

// The indexed shortest-response pick chooses what the scan may choose:
// the lowest estimate (recent time, or the mean of the recent times for a
// provider without one, × (in flight + 1)) among the providers not
// excluded, through churn, recent times going stale with the clock,
// excluded sets and log overflows.
func TestShortestResponseIndexAgreesWithScan(t *testing.T) {
	for _, n := range []int{indexMin - 1, indexMin, 300, 1000} {
		c := newClock()
		lb := NewShortestResponse(Options{Seed: uint64(n), Now: c.now, ProbeAfter: time.Second})
		weights := make([]int, n)
		for i := range weights {
			weights[i] = []int{0, 50, 100, 150}[i%4]
		}
		invs := providers(weights...)
		p := lb.Build(invs).(*shortestPicker)
		require.Equal(t, n >= indexMin, p.ix != nil)
		stats := make([]*Stat, n)
		for i, inv := range invs {
			stats[i] = lb.Stats().For(inv)
		}
		r := rand.New(rand.NewPCG(2, uint64(n)))
		for round := range 3000 {
			c.add(time.Duration(r.IntN(60)) * time.Millisecond)
			changes := r.IntN(4)
			if round%500 == 0 {
				changes = logSize + 10
			}
			for range changes {
				st := stats[r.IntN(n)]
				switch {
				case r.IntN(4) == 0:
					st.SetActive(int64(r.IntN(3)))
				case st.Active() > 0:
					st.End(c.now(), time.Duration(1+r.IntN(4))*time.Millisecond, false)
				default:
					st.Begin(c.now())
				}
			}
			ex := excludeSet{}
			switch round % 4 {
			case 1:
				for range 3 {
					ex[r.IntN(n)] = true
				}
			case 2:
				for i := range stats {
					ex[i] = weights[i] > 0
				}
			}
			got, err := p.Pick(call("m"), ex)
			require.NoError(t, err)
			require.False(t, ex[got], "round %d: picked excluded %d", round, got)
			nowMs := c.now().UnixMilli()
			var sum, known uint64
			for _, st := range stats {
				if rt := lb.recent(st, nowMs); rt > 0 {
					sum, known = sum+rt, known+1
				}
			}
			mean := uint64(1)
			if known > 0 {
				mean = max(sum/known, 1)
			}
			est := func(i int) uint64 {
				rt := lb.recent(stats[i], nowMs)
				if rt == 0 {
					rt = mean
				}
				return rt * uint64(max(stats[i].Active(), 0)+1)
			}
			positiveLeft := false
			low := uint64(1 << 63)
			for i := range stats {
				if !ex[i] && weights[i] > 0 {
					positiveLeft = true
					low = min(low, est(i))
				}
			}
			if !positiveLeft {
				require.Zero(t, weights[got], "round %d: only weight 0 is left", round)
				continue
			}
			require.Positive(t, weights[got], "round %d", round)
			require.Equal(t, low, est(got), "round %d: picked %d", round, got)
		}
		if p.ix != nil {
			require.Equal(t, lb.Stats().log.seq.Load(), p.ix.seq, "the picks went through the index")
		}
	}
}

// The change log is written only once a reader has looked: calls through
// a balancer that reads no log (random here) write nothing, and a
// least-active index built afterwards over the same statistics still
// sees the counts of the calls made before (its first look rescans
// every provider) and every change after.
func TestChangeLogWrittenOnceRead(t *testing.T) {
	stats := NewStats(nil)
	invs := providers(make([]int, indexMin)...)
	now := time.Now()
	for _, inv := range invs {
		stats.For(inv).Begin(now)
		stats.For(inv).Begin(now)
	}
	stats.For(invs[7]).End(now, time.Millisecond, false)
	require.Zero(t, stats.log.seq.Load(), "nobody reads the log: nothing written")

	lb := NewLeastActive(Options{Seed: 1, Stats: stats})
	p := lb.Build(invs).(*leastActivePicker)
	require.NotNil(t, p.ix)
	got, err := p.Pick(call("m"), excludeSet{})
	require.NoError(t, err)
	require.Equal(t, 7, got, "the one provider with a call fewer, counted before the log was read")

	stats.For(invs[7]).Begin(now)
	stats.For(invs[30]).End(now, time.Millisecond, false)
	require.Equal(t, uint64(2), stats.log.seq.Load(), "read once: every change written")
	got, err = p.Pick(call("m"), excludeSet{})
	require.NoError(t, err)
	require.Equal(t, 30, got)
	require.Equal(t, stats.log.seq.Load(), p.ix.seq, "the pick went through the index")
}
