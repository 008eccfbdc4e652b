package loadbalance

import (
	"math"
	"sync"
)

// indexMin is the number of providers from which least-active picks use a
// leastActiveIndex; below it a scan is as cheap.
const indexMin = 64

// maxRejects bounds the excluded providers one indexed pick steps over
// before it falls back to a scan.
const maxRejects = 8

// leastActiveIndex makes a least-active pick among n providers cost about
// √n instead of n. The providers are cut into blocks of about √n; each
// block keeps the lowest in-flight count among its candidates and the sum
// of their weights at that count. A pick reads, from the Stats' change
// log, which providers' counts changed since the last pick, rescans only
// their blocks, finds the lowest count over the blocks, draws a weight
// offset over the blocks at that count, and walks one block to the
// provider. A provider the caller excludes is set aside and the draw
// repeated: the first provider drawn that is not excluded is chosen with
// probability proportional to its weight among those not excluded at the
// lowest count, which is what the scan gives. One pick at a time uses the
// index (TryLock); a concurrent pick scans instead of waiting.
type leastActiveIndex struct {
	mu      sync.Mutex
	tracker                   // which blocks changed
	weight  []int64           // candidate weight of each provider; 0: not a candidate
	act     []int64           // in-flight count of each candidate, as last read
	blocks  []laBlock         // the blocks' summaries
	rejects [maxRejects]int32 // providers set aside in the current pick
}

type laBlock struct {
	any   bool  // the block has a candidate
	least int64 // lowest in-flight count among its candidates
	tieW  int64 // sum of the weights of the candidates at least
}

// tracker follows, through the Stats' change log, which blocks of a list
// hold providers whose statistics changed.
type tracker struct {
	list  *statList // the statistics the blocks were computed from
	seq   uint64    // the change log's sequence number last read
	size  int       // providers per block
	byID  map[uint32][]int32
	dirty []bool // blocks to rescan
}

func newTracker(n int) tracker {
	size := max(int(math.Sqrt(float64(n))), 8)
	dirty := make([]bool, (n+size-1)/size)
	for b := range dirty {
		dirty[b] = true
	}
	return tracker{size: size, dirty: dirty}
}

// update marks the blocks whose providers changed since the last update
// (every block when the list of statistics changed or the log cannot
// tell) and returns the statistics.
func (t *tracker) update(s *snapshot) []*Stat {
	stats := s.statsNow()
	list := s.stat.Load()
	log := &s.stats.log
	all := log.read() // the first look: nothing was written before it
	cur := log.seq.Load()
	switch {
	case list != t.list || list == nil:
		t.list = list
		t.byID = make(map[uint32][]int32, len(stats))
		for i, st := range stats {
			b := int32(i / t.size)
			if ids := t.byID[st.id]; len(ids) == 0 || ids[len(ids)-1] != b {
				t.byID[st.id] = append(ids, b)
			}
		}
		all = true
	case cur-t.seq > logSize:
		all = true
	default:
		for n := t.seq + 1; n <= cur; n++ {
			v := log.ring[n%logSize].Load()
			if v>>32 != n&math.MaxUint32 {
				all = true
				break
			}
			for _, b := range t.byID[uint32(v)] {
				t.dirty[b] = true
			}
		}
	}
	t.seq = cur
	if all {
		for b := range t.dirty {
			t.dirty[b] = true
		}
	}
	return stats
}

// bounds returns the first and past-the-last provider of block b.
func (t *tracker) bounds(b, n int) (int, int) { return b * t.size, min((b+1)*t.size, n) }

// newLeastActiveIndex returns the index of s, or nil when s is too small
// to need one. Candidates are the providers of positive weight, or every
// provider with weight 1 when none has one, as for the scan.
func newLeastActiveIndex(s *snapshot) *leastActiveIndex {
	n := len(s.entries)
	if n < indexMin || s.stats == nil {
		return nil
	}
	ix := &leastActiveIndex{tracker: newTracker(n), weight: candidateWeights(s), act: make([]int64, n)}
	ix.blocks = make([]laBlock, len(ix.dirty))
	return ix
}

// candidateWeights returns the weight of each provider as a candidate:
// its weight, or 1 for every provider when none has a positive one.
func candidateWeights(s *snapshot) []int64 {
	w := make([]int64, len(s.entries))
	allZero := len(s.positive) == 0
	for i := range s.entries {
		switch e := s.entries[i].weight; {
		case e > 0:
			w[i] = e
		case allZero:
			w[i] = 1
		}
	}
	return w
}

// refresh brings the blocks up to date with the statistics. ix.mu is held.
func (ix *leastActiveIndex) refresh(s *snapshot) {
	stats := ix.update(s)
	for b, d := range ix.dirty {
		if d {
			ix.rescan(stats, b)
			ix.dirty[b] = false
		}
	}
}

// rescan reads the counts of block b's candidates.
func (ix *leastActiveIndex) rescan(stats []*Stat, b int) {
	blk := laBlock{}
	lo, hi := ix.bounds(b, len(ix.weight))
	for i := lo; i < hi; i++ {
		w := ix.weight[i]
		if w == 0 {
			continue
		}
		a := stats[i].Active()
		ix.act[i] = a
		switch {
		case !blk.any || a < blk.least:
			blk = laBlock{any: true, least: a, tieW: w}
		case a == blk.least:
			blk.tieW += w
		}
	}
	ix.blocks[b] = blk
}

// summary is block b without the providers set aside (the first k of
// ix.rejects).
func (ix *leastActiveIndex) summary(b, k int) laBlock {
	touched := false
	for _, r := range ix.rejects[:k] {
		if int(r)/ix.size == b {
			touched = true
			break
		}
	}
	if !touched {
		return ix.blocks[b]
	}
	blk := laBlock{}
	lo, hi := ix.bounds(b, len(ix.weight))
	for i := lo; i < hi; i++ {
		w := ix.weight[i]
		if w == 0 || ix.rejected(i, k) {
			continue
		}
		a := ix.act[i]
		switch {
		case !blk.any || a < blk.least:
			blk = laBlock{any: true, least: a, tieW: w}
		case a == blk.least:
			blk.tieW += w
		}
	}
	return blk
}

func (ix *leastActiveIndex) rejected(i, k int) bool { return isRejected(&ix.rejects, i, k) }

// isRejected reports whether i is among the first k of rejects.
func isRejected(rejects *[maxRejects]int32, i, k int) bool {
	for _, r := range rejects[:k] {
		if int(r) == i {
			return true
		}
	}
	return false
}

// pick returns the chosen provider, or false when the caller must scan
// (every candidate excluded, or too many).
func (ix *leastActiveIndex) pick(s *snapshot, rnd randSource, ex Exclude) (int, bool) {
	ix.refresh(s)
	for k := 0; k < maxRejects; k++ {
		var least, total int64
		found := false
		for b := range ix.blocks {
			blk := ix.summary(b, k)
			switch {
			case !blk.any:
			case !found || blk.least < least:
				least, total, found = blk.least, blk.tieW, true
			case blk.least == least:
				total += blk.tieW
			}
		}
		if !found {
			return 0, false
		}
		off := rnd.int64N(total)
		i := -1
		for b := range ix.blocks {
			blk := ix.summary(b, k)
			if !blk.any || blk.least != least {
				continue
			}
			if off >= blk.tieW {
				off -= blk.tieW
				continue
			}
			lo, hi := ix.bounds(b, len(ix.weight))
			for j := lo; j < hi; j++ {
				w := ix.weight[j]
				if w == 0 || ix.act[j] != least || ix.rejected(j, k) {
					continue
				}
				if off -= w; off < 0 {
					i = j
					break
				}
			}
			break
		}
		if i < 0 {
			return 0, false // cannot happen: the block's sum says otherwise
		}
		if !excluded(ex, i) {
			return i, true
		}
		ix.rejects[k] = int32(i)
	}
	return 0, false
}

// shortestIndex is leastActiveIndex for shortest response: each block
// keeps, over all its providers, the sum and number of recent response
// times (for the mean that stands in for the providers without one) and
// when the first of them goes stale, and, over its candidates, the lowest
// estimate among those with a recent time (time × (in flight + 1)) and the
// lowest in flight + 1 among those without one (their estimate is the
// mean times it), each with the weight of its ties. A block is rescanned
// when one of its providers changed or a recent time in it went stale.
type shortestIndex struct {
	mu      sync.Mutex
	tracker                   // which blocks changed
	weight  []int64           // candidate weight of each provider; 0: not a candidate
	rt      []uint64          // recent response time of each provider as last read; 0: none
	act1    []uint64          // in flight + 1 of each candidate, as last read
	blocks  []srBlock         // the blocks' summaries
	rejects [maxRejects]int32 // providers set aside in the current pick
}

type srBlock struct {
	sum, known uint64 // recent response times of the block's providers
	expires    int64  // unix ms after which one of them is stale
	timed      tie64  // candidates with a recent time: lowest time × (in flight + 1)
	untimed    tie64  // candidates without one: lowest in flight + 1
}

// tie64 is the lowest value of a set and the weight of the members that
// have it.
type tie64 struct {
	any   bool
	least uint64
	tieW  int64
}

func (t *tie64) add(v uint64, w int64) {
	switch {
	case !t.any || v < t.least:
		*t = tie64{any: true, least: v, tieW: w}
	case v == t.least:
		t.tieW += w
	}
}

func newShortestIndex(s *snapshot) *shortestIndex {
	n := len(s.entries)
	if n < indexMin || s.stats == nil {
		return nil
	}
	ix := &shortestIndex{tracker: newTracker(n), weight: candidateWeights(s), rt: make([]uint64, n), act1: make([]uint64, n)}
	ix.blocks = make([]srBlock, len(ix.dirty))
	return ix
}

// refresh brings the blocks up to date at nowMs. ix.mu is held.
func (ix *shortestIndex) refresh(s *snapshot, b *ShortestResponseBalancer, nowMs int64) {
	stats := ix.update(s)
	for k, d := range ix.dirty {
		if d || nowMs > ix.blocks[k].expires {
			ix.rescan(stats, b, k, nowMs)
			ix.dirty[k] = false
		}
	}
}

func (ix *shortestIndex) rescan(stats []*Stat, b *ShortestResponseBalancer, k int, nowMs int64) {
	blk := srBlock{expires: math.MaxInt64}
	lo, hi := ix.bounds(k, len(ix.weight))
	for i := lo; i < hi; i++ {
		st := stats[i]
		rt := b.recent(st, nowMs)
		ix.rt[i] = rt
		if rt > 0 {
			blk.sum += rt
			blk.known++
			blk.expires = min(blk.expires, st.lastEnd.Load()+b.staleMs)
		}
		w := ix.weight[i]
		if w == 0 {
			continue
		}
		a1 := uint64(max(st.Active(), 0) + 1)
		ix.act1[i] = a1
		if rt > 0 {
			blk.timed.add(rt*a1, w)
		} else {
			blk.untimed.add(a1, w)
		}
	}
	ix.blocks[k] = blk
}

// best returns block k's lowest estimate with mean for the providers
// without a recent time, without the first r rejected providers.
func (ix *shortestIndex) best(k, r int, mean uint64) tie64 {
	timed, untimed := ix.blocks[k].timed, ix.blocks[k].untimed
	for _, j := range ix.rejects[:r] {
		if int(j)/ix.size == k {
			timed, untimed = tie64{}, tie64{}
			lo, hi := ix.bounds(k, len(ix.weight))
			for i := lo; i < hi; i++ {
				if w := ix.weight[i]; w != 0 && !isRejected(&ix.rejects, i, r) {
					if ix.rt[i] > 0 {
						timed.add(ix.rt[i]*ix.act1[i], w)
					} else {
						untimed.add(ix.act1[i], w)
					}
				}
			}
			break
		}
	}
	if untimed.any {
		timed.add(mean*untimed.least, untimed.tieW)
	}
	return timed
}

// pick returns the chosen provider, or false when the caller must scan.
func (ix *shortestIndex) pick(s *snapshot, b *ShortestResponseBalancer, nowMs int64, ex Exclude) (int, bool) {
	ix.refresh(s, b, nowMs)
	var sum, known uint64
	for k := range ix.blocks {
		sum += ix.blocks[k].sum
		known += ix.blocks[k].known
	}
	mean := uint64(1)
	if known > 0 {
		mean = max(sum/known, 1)
	}
	for r := 0; r < maxRejects; r++ {
		var all tie64
		for k := range ix.blocks {
			if t := ix.best(k, r, mean); t.any {
				all.addTie(t)
			}
		}
		if !all.any {
			return 0, false
		}
		off := b.rnd.int64N(all.tieW)
		i := -1
		for k := range ix.blocks {
			t := ix.best(k, r, mean)
			if !t.any || t.least != all.least {
				continue
			}
			if off >= t.tieW {
				off -= t.tieW
				continue
			}
			lo, hi := ix.bounds(k, len(ix.weight))
			for j := lo; j < hi; j++ {
				w := ix.weight[j]
				if w == 0 || isRejected(&ix.rejects, j, r) {
					continue
				}
				rt := ix.rt[j]
				if rt == 0 {
					rt = mean
				}
				if rt*ix.act1[j] != all.least {
					continue
				}
				if off -= w; off < 0 {
					i = j
					break
				}
			}
			break
		}
		if i < 0 {
			return 0, false
		}
		if !excluded(ex, i) {
			return i, true
		}
		ix.rejects[r] = int32(i)
	}
	return 0, false
}

// addTie merges another set's lowest value and its weight.
func (t *tie64) addTie(o tie64) {
	switch {
	case !t.any || o.least < t.least:
		*t = o
	case o.least == t.least:
		t.tieW += o.tieW
	}
}
