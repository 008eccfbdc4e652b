package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/minidubbo/minidubbo/monitor"
)

// Hist is a latency histogram in microseconds, kept sparse: the non-zero
// buckets of a histogram made by monitor.NewHistogram, by bucket index in
// increasing order. It merges without building the full HdrHistogram (a
// few hundred KiB of counts), so storing and querying stay cheap.
type Hist struct {
	Index []int32
	Count []int64
}

// buckets holds, for each bucket index of monitor.NewHistogram, the
// highest value that bucket stands for, taken from the library itself.
var buckets = sync.OnceValue(func() []int64 {
	h := monitor.NewHistogram()
	s := h.Export()
	for i := range s.Counts {
		s.Counts[i] = 1
	}
	bars := hdrhistogram.Import(s).Distribution()
	out := make([]int64, len(bars))
	for i, b := range bars {
		out[i] = b.To
	}
	return out
})

// errHist is the cause of every malformed histogram.
var errHist = errors.New("malformed latency histogram")

// HistFromWire checks w against the bounds of monitor.NewHistogram and
// returns it sorted, with repeated indexes added up and zeros left out.
func HistFromWire(w monitor.Histogram) (Hist, error) {
	if len(w.Index) != len(w.Count) {
		return Hist{}, fmt.Errorf("%w: %d indexes, %d counts", errHist, len(w.Index), len(w.Count))
	}
	n := int32(len(buckets()))
	sorted := true
	for k, i := range w.Index {
		if i < 0 || i >= n || w.Count[k] < 0 || w.Count[k] > MaxCount {
			return Hist{}, fmt.Errorf("%w: bucket %d count %d", errHist, i, w.Count[k])
		}
		if k > 0 && i <= w.Index[k-1] {
			sorted = false
		}
	}
	h := Hist{Index: slices.Clone(w.Index), Count: slices.Clone(w.Count)}
	if !sorted {
		h = Hist{}.Add(h.sortedCopy())
	}
	return h.compact(), nil
}

// sortedCopy returns h's pairs ordered by index (repeats kept).
func (h Hist) sortedCopy() Hist {
	idx := make([]int, len(h.Index))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(h.Index[a]) - int(h.Index[b]) })
	out := Hist{Index: make([]int32, len(idx)), Count: make([]int64, len(idx))}
	for k, i := range idx {
		out.Index[k], out.Count[k] = h.Index[i], h.Count[i]
	}
	return out
}

// compact drops zero counts and adds up repeated indexes of a sorted h.
func (h Hist) compact() Hist {
	out := Hist{Index: h.Index[:0], Count: h.Count[:0]}
	for k, i := range h.Index {
		c := h.Count[k]
		if c == 0 {
			continue
		}
		if n := len(out.Index); n > 0 && out.Index[n-1] == i {
			out.Count[n-1] += c
			continue
		}
		out.Index = append(out.Index, i)
		out.Count = append(out.Count, c)
	}
	return out
}

// Add returns the sum of h and o, both sorted by index.
func (h Hist) Add(o Hist) Hist {
	out := Hist{Index: make([]int32, 0, len(h.Index)+len(o.Index)), Count: make([]int64, 0, len(h.Index)+len(o.Index))}
	a, b := 0, 0
	for a < len(h.Index) || b < len(o.Index) {
		switch {
		case b == len(o.Index) || (a < len(h.Index) && h.Index[a] < o.Index[b]):
			out.Index, out.Count = append(out.Index, h.Index[a]), append(out.Count, h.Count[a])
			a++
		case a == len(h.Index) || o.Index[b] < h.Index[a]:
			out.Index, out.Count = append(out.Index, o.Index[b]), append(out.Count, o.Count[b])
			b++
		default:
			out.Index, out.Count = append(out.Index, h.Index[a]), append(out.Count, h.Count[a]+o.Count[b])
			a++
			b++
		}
	}
	return out.compact()
}

// Total returns the number of recorded values.
func (h Hist) Total() int64 {
	var n int64
	for _, c := range h.Count {
		n += c
	}
	return n
}

// Quantile returns the value in microseconds at quantile q (0 < q ≤ 100),
// the same value the HdrHistogram's ValueAtQuantile gives, or 0 when h is
// empty.
func (h Hist) Quantile(q float64) int64 {
	q = min(q, 100)
	target := int64(q/100*float64(h.Total()) + 0.5)
	if target <= 0 {
		return 0
	}
	var seen int64
	for k, c := range h.Count {
		seen += c
		if seen >= target {
			return buckets()[h.Index[k]]
		}
	}
	return buckets()[h.Index[len(h.Index)-1]]
}

// CountAtOrBelow returns, for each bound (microseconds, increasing), how
// many values are at or below it, counting a bucket by its highest value.
func (h Hist) CountAtOrBelow(bounds []int64) []uint64 {
	out := make([]uint64, len(bounds))
	b := 0
	var seen uint64
	for k, i := range h.Index {
		v := buckets()[i]
		for b < len(bounds) && bounds[b] < v {
			out[b] = seen
			b++
		}
		seen += uint64(h.Count[k])
	}
	for ; b < len(bounds); b++ {
		out[b] = seen
	}
	return out
}

// marshal encodes h as the number of pairs, then each pair as the index's
// distance from the previous one and the count, all as uvarints.
func (h Hist) marshal() []byte {
	buf := make([]byte, 0, 2+len(h.Index)*4)
	buf = binary.AppendUvarint(buf, uint64(len(h.Index)))
	prev := int32(0)
	for k, i := range h.Index {
		buf = binary.AppendUvarint(buf, uint64(i-prev))
		buf = binary.AppendUvarint(buf, uint64(h.Count[k]))
		prev = i
	}
	return buf
}

// unmarshalHist decodes what marshal wrote, checking every index and count.
func unmarshalHist(b []byte) (Hist, error) {
	if len(b) == 0 {
		return Hist{}, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) || n > uint64(len(buckets())) {
		return Hist{}, fmt.Errorf("%w: bad pair count", errHist)
	}
	b = b[k:]
	h := Hist{Index: make([]int32, 0, n), Count: make([]int64, 0, n)}
	idx := uint64(0)
	for j := range n {
		d, k1 := binary.Uvarint(b)
		if k1 <= 0 || (j > 0 && d == 0) {
			return Hist{}, fmt.Errorf("%w: bad index at pair %d", errHist, j)
		}
		c, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || c > 1<<62 {
			return Hist{}, fmt.Errorf("%w: bad count at pair %d", errHist, j)
		}
		b = b[k1+k2:]
		idx += d
		if idx >= uint64(len(buckets())) {
			return Hist{}, fmt.Errorf("%w: bucket %d out of range", errHist, idx)
		}
		h.Index = append(h.Index, int32(idx))
		h.Count = append(h.Count, int64(c))
	}
	if len(b) != 0 {
		return Hist{}, fmt.Errorf("%w: %d trailing bytes", errHist, len(b))
	}
	return h, nil
}
