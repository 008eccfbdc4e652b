package loadbalance

import (
	"strconv"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// BenchmarkPick measures one Pick per algorithm for 3, 100 and 1000
// providers of mixed weights, on a picker built once, nothing excluded.
func BenchmarkPick(b *testing.B) {
	for _, algo := range Builtin().Names() {
		for _, n := range []int{3, 100, 1000} {
			b.Run(algo+"/"+strconv.Itoa(n), func(b *testing.B) {
				weights := make([]int, n)
				for i := range weights {
					weights[i] = 50 + 50*(i%3)
				}
				invs := providers(weights...)
				lb, err := Builtin().New(algo)
				if err != nil {
					b.Fatal(err)
				}
				if su, ok := lb.(StatsUser); ok {
					for i, inv := range invs {
						st := su.Stats().For(inv)
						st.Begin(time.Now())
						st.End(time.Now(), time.Duration(1+i%7)*time.Millisecond, false)
						st.SetActive(int64(i % 5))
					}
				}
				inv := call("get", "user-42")
				p := lb.Build(invs)
				if _, err := p.Pick(inv, nil); err != nil { // per-method state outside the loop
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Pick(inv, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConsistentHashRing isolates the ring lookup from key hashing to
// show O(log n): 160 points per provider.
func BenchmarkConsistentHashRing(b *testing.B) {
	for _, n := range []int{3, 100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			members := make([]string, n)
			for i := range members {
				members[i] = "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":20880"
			}
			r := buildRing(members, DefaultVirtualNodes)
			h := uint32(0x9e3779b9)
			b.ReportAllocs()
			for b.Loop() {
				h = h*1664525 + 1013904223
				_ = r.lookup(h)
			}
		})
	}
}

// BenchmarkPickChurn is BenchmarkPick with the counts moving as under
// load: each op picks, begins a call on the provider picked and ends the
// call begun 100 ops before (100 calls in flight), so every pick sees two
// changed counts.
func BenchmarkPickChurn(b *testing.B) {
	for _, algo := range []string{"leastactive", "shortestresponse", "p2c"} {
		for _, n := range []int{100, 1000} {
			b.Run(algo+"/"+strconv.Itoa(n), func(b *testing.B) {
				weights := make([]int, n)
				for i := range weights {
					weights[i] = 50 + 50*(i%3)
				}
				invs := providers(weights...)
				lb, err := Builtin().New(algo)
				if err != nil {
					b.Fatal(err)
				}
				stats := lb.(StatsUser).Stats()
				inv := call("get", "user-42")
				p := lb.Build(invs)
				var inflight [100]*Stat
				now := time.Now()
				k := 0
				b.ReportAllocs()
				for b.Loop() {
					i, err := p.Pick(inv, nil)
					if err != nil {
						b.Fatal(err)
					}
					if st := inflight[k]; st != nil {
						st.End(now, time.Millisecond, false)
					}
					st := stats.For(invs[i])
					st.Begin(now)
					inflight[k] = st
					k = (k + 1) % len(inflight)
				}
			})
		}
	}
}

// BenchmarkRoundRobinSharedLists alternates picks of one method between
// two lists that share providers (every provider, and every other one), as
// routes of one method can: round robin's state is shared between them.
func BenchmarkRoundRobinSharedLists(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			weights := make([]int, n)
			for i := range weights {
				weights[i] = 50 + 50*(i%3)
			}
			all := providers(weights...)
			var half []protocol.Invoker
			for i := 0; i < n; i += 2 {
				half = append(half, all[i])
			}
			lb := NewRoundRobin(Options{})
			ps := []Picker{lb.Build(all), lb.Build(half)}
			inv := call("get", "user-42")
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if _, err := ps[k&1].Pick(inv, nil); err != nil {
					b.Fatal(err)
				}
				k++
			}
		})
	}
}

// everyNth excludes every provider whose index is not a multiple of n: a
// list most of whose providers are down.
type everyNth int

func (e everyNth) Excluded(i int) bool { return i%int(e) != 0 }

// BenchmarkRoundRobinMostlyDown picks among 1,000 providers of which half,
// 9 in 10 and 99 in 100 are excluded (down) on every pick.
func BenchmarkRoundRobinMostlyDown(b *testing.B) {
	for _, every := range []int{2, 10, 100} {
		b.Run("up=1in"+strconv.Itoa(every), func(b *testing.B) {
			weights := make([]int, 1000)
			for i := range weights {
				weights[i] = 50 + 50*(i%3)
			}
			p := NewRoundRobin(Options{}).Build(providers(weights...))
			inv := call("get", "user-42")
			ex := everyNth(every)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Pick(inv, ex); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
