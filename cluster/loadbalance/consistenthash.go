package loadbalance

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minidubbo/minidubbo/protocol"
)

// DefaultVirtualNodes is the number of ring points per provider.
const DefaultVirtualNodes = 160

// ConsistentHashBalancer maps a key taken from the call to a provider on a
// ring of virtual nodes, as Dubbo does: for each provider address and
// i < VirtualNodes/4, MD5(address + i) gives four little-endian 32-bit
// points; a key's point is the first four bytes of MD5(key), and the key
// goes to the first ring point at or after it, wrapping around past the
// last. The ring is built from the sorted set of provider addresses, so
// every process maps a key the same way whatever order its list is in, and
// it is rebuilt only when that set changes; removing one of N providers
// moves about 1/N of the keys. Select is a binary search, O(log n).
//
// The key is the string form of the chosen arguments (default the first),
// concatenated, or the value of an attachment when HashAttachment is set
// and the call carries it (client-address hashing, for example). Weights
// are ignored.
type ConsistentHashBalancer struct {
	vnodes     int
	args       []int
	attachment string
	builds     atomic.Int64
	mu         sync.Mutex
	lastRing   atomic.Pointer[ring] // shared by the pickers of the same set
}

var _ LoadBalance = (*ConsistentHashBalancer)(nil)

// ring is the immutable hash ring of one provider set.
type ring struct {
	setHash uint64
	members []string // sorted distinct addresses
	points  []uint32 // sorted
	owners  []int32  // owners[k] is the member index of points[k]
}

// chPicker binds a ring to one provider list.
type chPicker struct {
	b    *ConsistentHashBalancer
	n    int
	ring *ring
	slot []int32 // member index -> invoker index
}

// NewConsistentHash returns a consistent-hash balancer.
func NewConsistentHash(o Options) *ConsistentHashBalancer {
	b := &ConsistentHashBalancer{vnodes: o.VirtualNodes, args: o.HashArguments, attachment: o.HashAttachment}
	if b.vnodes <= 0 {
		b.vnodes = DefaultVirtualNodes
	}
	b.vnodes = (b.vnodes + 3) / 4 * 4
	if len(b.args) == 0 {
		b.args = []int{0}
	}
	return b
}

// Pick implements Picker: the provider owning the first ring point at or
// after the key's; when that one is excluded, the owner of the next point
// that is not.
func (p *chPicker) Pick(inv *protocol.Invocation, ex Exclude) (int, error) {
	switch p.n {
	case 0:
		return 0, ErrNoInvokers
	case 1:
		if excluded(ex, 0) {
			return 0, ErrNoInvokers
		}
		return 0, nil
	}
	r := p.ring
	k := r.search(hashKey(p.b.key(inv)))
	for range len(r.points) {
		if i := int(p.slot[r.owners[k]]); !excluded(ex, i) {
			return i, nil
		}
		if k++; k == len(r.points) {
			k = 0
		}
	}
	return 0, ErrNoInvokers
}

// Key returns the hash key the balancer uses for inv.
func (b *ConsistentHashBalancer) key(inv *protocol.Invocation) string {
	if inv == nil {
		return ""
	}
	if b.attachment != "" {
		if v, ok := inv.Attachments[b.attachment]; ok {
			return v
		}
	}
	if len(b.args) == 1 {
		i := b.args[0]
		if i < 0 || i >= len(inv.Args) {
			return ""
		}
		return argString(inv.Args[i])
	}
	var sb strings.Builder
	for _, i := range b.args {
		if i >= 0 && i < len(inv.Args) {
			sb.WriteString(argString(inv.Args[i]))
		}
	}
	return sb.String()
}

func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// Build implements LoadBalance. The ring depends only on the set of
// provider addresses and is shared with the previous list's when the set
// is the same.
func (b *ConsistentHashBalancer) Build(invokers []protocol.Invoker) Picker {
	p := &chPicker{b: b, n: len(invokers)}
	if len(invokers) < 2 {
		return p
	}
	addrs := make([]string, len(invokers))
	for i, inv := range invokers {
		addrs[i] = inv.URL().Address()
	}
	members := slices.Clone(addrs)
	slices.Sort(members)
	members = slices.Compact(members)
	h := fnv.New64a()
	for _, m := range members {
		h.Write([]byte(m))
		h.Write([]byte{0})
	}
	setHash := h.Sum64()
	b.mu.Lock()
	r := b.lastRing.Load()
	if r == nil || r.setHash != setHash || !slices.Equal(r.members, members) {
		r = buildRing(members, b.vnodes)
		r.setHash = setHash
		b.builds.Add(1)
		b.lastRing.Store(r)
	}
	b.mu.Unlock()
	p.ring = r
	p.slot = make([]int32, len(members))
	for i := len(addrs) - 1; i >= 0; i-- { // the first invoker of an address wins
		m, _ := slices.BinarySearch(members, addrs[i])
		p.slot[m] = int32(i)
	}
	return p
}

func buildRing(members []string, vnodes int) *ring {
	type point struct {
		p uint32
		m int32
	}
	pts := make([]point, 0, len(members)*vnodes)
	for m, addr := range members {
		for i := 0; i < vnodes/4; i++ {
			d := md5.Sum([]byte(addr + strconv.Itoa(i)))
			for h := range 4 {
				pts = append(pts, point{binary.LittleEndian.Uint32(d[4*h:]), int32(m)})
			}
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		if a.p != b.p {
			if a.p < b.p {
				return -1
			}
			return 1
		}
		return int(a.m - b.m)
	})
	r := &ring{members: members, points: make([]uint32, len(pts)), owners: make([]int32, len(pts))}
	for k, p := range pts {
		r.points[k], r.owners[k] = p.p, p.m
	}
	return r
}

// hashKey is the ring point of a key: the first four bytes of its MD5,
// little-endian.
func hashKey(key string) uint32 {
	d := md5.Sum([]byte(key))
	return binary.LittleEndian.Uint32(d[:4])
}

// lookup returns the member owning the first point at or after h, wrapping
// around to the first point.
func (r *ring) lookup(h uint32) int32 { return r.owners[r.search(h)] }

// search returns the index of the first point at or after h, wrapping
// around to 0.
func (r *ring) search(h uint32) int {
	lo, hi := 0, len(r.points)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.points[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(r.points) {
		lo = 0
	}
	return lo
}

// RingBuilds returns how many rings the balancer has built (for tests and
// diagnostics).
func (b *ConsistentHashBalancer) RingBuilds() int64 { return b.builds.Load() }
