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
	list    *statList // the statistics the blocks were computed from
	seq     uint64    // the change log's sequence number last read
	size    int       // providers per block
	byID    map[uint32][]int32
	weight  []int64 // candidate weight of each provider; 0: not a candidate
	act     []int64 // in-flight count of each candidate, as last read
	blocks  []laBlock
	rejects [maxRejects]int32 // providers set aside in the current pick
}

type laBlock struct {
	dirty bool
	any   bool  // the block has a candidate
	least int64 // lowest in-flight count among its candidates
	tieW  int64 // sum of the weights of the candidates at least
}

// newLeastActiveIndex returns the index of s, or nil when s is too small
// to need one. Candidates are the providers of positive weight, or every
// provider with weight 1 when none has one, as for the scan.
func newLeastActiveIndex(s *snapshot) *leastActiveIndex {
	n := len(s.entries)
	if n < indexMin || s.stats == nil {
		return nil
	}
	size := max(int(math.Sqrt(float64(n))), 8)
	ix := &leastActiveIndex{
		size:   size,
		weight: make([]int64, n),
		act:    make([]int64, n),
		blocks: make([]laBlock, (n+size-1)/size),
	}
	allZero := len(s.positive) == 0
	for i := range s.entries {
		switch w := s.entries[i].weight; {
		case w > 0:
			ix.weight[i] = w
		case allZero:
			ix.weight[i] = 1
		}
	}
	return ix
}

// refresh brings the blocks up to date with the statistics. ix.mu is held.
func (ix *leastActiveIndex) refresh(s *snapshot) {
	stats := s.statsNow()
	list := s.stat.Load()
	log := &s.stats.log
	cur := log.seq.Load()
	all := false
	switch {
	case list != ix.list || list == nil || len(stats) != len(ix.weight):
		ix.list = list
		ix.byID = make(map[uint32][]int32, len(stats))
		for i, st := range stats {
			b := int32(i / ix.size)
			if ids := ix.byID[st.id]; len(ids) == 0 || ids[len(ids)-1] != b {
				ix.byID[st.id] = append(ids, b)
			}
		}
		all = true
	case cur-ix.seq > logSize:
		all = true
	default:
		for n := ix.seq + 1; n <= cur; n++ {
			v := log.ring[n%logSize].Load()
			if v>>32 != n&math.MaxUint32 {
				all = true
				break
			}
			for _, b := range ix.byID[uint32(v)] {
				ix.blocks[b].dirty = true
			}
		}
	}
	ix.seq = cur
	for b := range ix.blocks {
		if all || ix.blocks[b].dirty {
			ix.rescan(stats, b)
		}
	}
}

// rescan reads the counts of block b's candidates.
func (ix *leastActiveIndex) rescan(stats []*Stat, b int) {
	blk := laBlock{}
	for i := b * ix.size; i < min((b+1)*ix.size, len(ix.weight)); i++ {
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
	for i := b * ix.size; i < min((b+1)*ix.size, len(ix.weight)); i++ {
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

func (ix *leastActiveIndex) rejected(i, k int) bool {
	for _, r := range ix.rejects[:k] {
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
			for j := b * ix.size; j < min((b+1)*ix.size, len(ix.weight)); j++ {
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
