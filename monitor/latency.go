package monitor

import (
	"math/bits"
	"sync/atomic"
)

// latency is the histogram of one key's call times in one interval, with
// the bucket layout of NewHistogram (so its counts are HdrHistogram counts
// and merge with any Report's) but updated with atomic adds instead of a
// lock. The counts are split in chunks of 1024, one per power-of-two range
// of values, allocated the first time a value falls in their range: a key
// whose calls take 100 µs to 10 ms holds about eight chunks (64 KiB), not
// the 184 KiB of the full range.
type latency struct {
	chunks []atomic.Pointer[chunk]
}

const (
	chunkBits = 10 // log2 of HdrHistogram's sub-bucket half count at 3 significant figures
	chunkLen  = 1 << chunkBits
	// subBucketMask: 2048 sub-buckets (unit resolution up to 2000 µs).
	subBucketMask = 2*chunkLen - 1
)

type chunk [chunkLen]atomic.Int64

// histCounts is the length of the counts array of NewHistogram.
var histCounts = len(NewHistogram().Export().Counts)

func newLatency() *latency {
	return &latency{chunks: make([]atomic.Pointer[chunk], (histCounts+chunkLen-1)/chunkLen)}
}

// histIndex is HdrHistogram's counts index of v (in [0, histHighest]) for
// the bounds of NewHistogram: lowest 1, 3 significant figures.
func histIndex(v int64) int {
	bucket := 64 - bits.LeadingZeros64(uint64(v|subBucketMask)) - (chunkBits + 1)
	sub := int(v >> uint(bucket))
	return (bucket+1)<<chunkBits + sub - chunkLen
}

// record adds one value in microseconds, clamped to the histogram's range.
func (l *latency) record(us int64) {
	i := histIndex(min(max(us, 0), histHighest))
	p := &l.chunks[i>>chunkBits]
	c := p.Load()
	if c == nil {
		c = new(chunk)
		if !p.CompareAndSwap(nil, c) {
			c = p.Load()
		}
	}
	c[i&(chunkLen-1)].Add(1)
}

// take returns the counts recorded since the last take in wire form,
// leaving every count that arrives meanwhile for the next one.
func (l *latency) take() Histogram {
	var h Histogram
	for ci := range l.chunks {
		c := l.chunks[ci].Load()
		if c == nil {
			continue
		}
		for j := range c {
			if n := c[j].Load(); n != 0 {
				c[j].Add(-n)
				h.Index = append(h.Index, int32(ci<<chunkBits+j))
				h.Count = append(h.Count, n)
			}
		}
	}
	return h
}
