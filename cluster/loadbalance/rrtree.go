package loadbalance

import "math"

// rrRebase is the number of rounds after which a round-robin view
// rebuilds its tree, so that base + weight×rounds stays far from overflow
// (a variable for the tests).
var rrRebase int64 = 1 << 24

// never is a time that never comes.
const never = math.MaxInt64

// rrTree is a kinetic tournament tree over the current values of smooth
// weighted round robin. Between the picks of a provider its current value
// is a line in the number of rounds k: base + weight×k; picking it
// subtracts the total from its base. Each node holds the leaf with the
// largest value in its subtree (the first on ties) and the first round at
// which one comparison below it turns (a line with a larger weight
// overtaking); a round recomputes only the nodes whose time has come.
// Picking costs O(log² n) amortized (the kinetic tournament bound), and
// equal weights never turn a comparison, so a plain rotation costs
// O(log n).
type rrTree struct {
	k    int64
	base []int64
	w    []int64 // 0: not a candidate
	size int     // leaves, a power of two
	win  []int32 // per node: the leaf with the largest value at k, -1 none
	fail []int64 // per node: the first round at which a comparison below it turns
}

// reset sizes t for n leaves; base and w are then filled and build called.
func (t *rrTree) reset(n int) {
	size := 2
	for size < n {
		size <<= 1
	}
	t.k, t.size = 0, size
	t.base = resize(t.base, n)
	t.w = resize(t.w, n)
	t.win = resize(t.win, 2*size)
	t.fail = resize(t.fail, 2*size)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// build computes every node from base and w.
func (t *rrTree) build() {
	for i := range t.size {
		t.setLeaf(i)
	}
	for x := t.size - 1; x >= 1; x-- {
		t.pull(x)
	}
}

func (t *rrTree) setLeaf(i int) {
	x := t.size + i
	t.win[x], t.fail[x] = -1, never
	if i < len(t.w) && t.w[i] > 0 {
		t.win[x] = int32(i)
	}
}

// value returns leaf i's current value.
func (t *rrTree) value(i int) int64 { return t.base[i] + t.w[i]*t.k }

// best returns the leaf with the largest value (the first on ties), -1
// when no leaf has a positive weight.
func (t *rrTree) best() int { return int(t.win[1]) }

// advance adds one round: every line rises by its weight.
func (t *rrTree) advance() {
	t.k++
	t.fix(1)
}

func (t *rrTree) fix(x int) {
	if t.fail[x] > t.k {
		return
	}
	t.fix(2 * x)
	t.fix(2*x + 1)
	t.pull(x)
}

// charge subtracts total from leaf i's value.
func (t *rrTree) charge(i int, total int64) {
	t.base[i] -= total
	t.update(i)
}

// setWeight changes leaf i's weight from now on, keeping its value.
func (t *rrTree) setWeight(i int, w int64) {
	v := t.value(i)
	t.w[i] = w
	t.base[i] = v - w*t.k
	t.update(i)
}

func (t *rrTree) update(i int) {
	t.setLeaf(i)
	for x := (t.size + i) >> 1; x >= 1; x >>= 1 {
		t.pull(x)
	}
}

// pull recomputes node x from its children, which are up to date at k.
func (t *rrTree) pull(x int) {
	a, b := t.win[2*x], t.win[2*x+1] // every leaf under a precedes b's
	f := min(t.fail[2*x], t.fail[2*x+1])
	switch {
	case a < 0:
		t.win[x] = b
	case b < 0:
		t.win[x] = a
	case t.value(int(b)) > t.value(int(a)):
		t.win[x] = b
		f = min(f, t.overtake(int(b), int(a), true))
	default:
		t.win[x] = a
		f = min(f, t.overtake(int(a), int(b), false))
	}
	t.fail[x] = f
}

// overtake returns the first round after k at which lose's value passes
// win's (reaches it, when lose wins ties), or never.
func (t *rrTree) overtake(win, lose int, loseWinsTies bool) int64 {
	dw := t.w[lose] - t.w[win]
	if dw <= 0 {
		return never
	}
	gap := t.value(win) - t.value(lose)
	if loseWinsTies {
		return t.k + (gap+dw-1)/dw
	}
	return t.k + gap/dw + 1
}

// warmHeap orders the providers still warming up by the time their weight
// next changes.
type warmHeap struct {
	at []int64
	i  []int32
}

func (h *warmHeap) reset(n int) {
	h.at = resize(h.at, n)[:0]
	h.i = resize(h.i, n)[:0]
}

func (h *warmHeap) len() int     { return len(h.at) }
func (h *warmHeap) minAt() int64 { return h.at[0] }
func (h *warmHeap) less(a, b int) bool {
	return h.at[a] < h.at[b] || (h.at[a] == h.at[b] && h.i[a] < h.i[b])
}

func (h *warmHeap) swap(a, b int) {
	h.at[a], h.at[b] = h.at[b], h.at[a]
	h.i[a], h.i[b] = h.i[b], h.i[a]
}

func (h *warmHeap) push(at int64, i int32) {
	h.at, h.i = append(h.at, at), append(h.i, i)
	for c := len(h.at) - 1; c > 0; {
		p := (c - 1) / 2
		if !h.less(c, p) {
			break
		}
		h.swap(c, p)
		c = p
	}
}

// pop removes the provider whose change comes first and returns it.
func (h *warmHeap) pop() int32 {
	top := h.i[0]
	last := len(h.at) - 1
	h.swap(0, last)
	h.at, h.i = h.at[:last], h.i[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= last {
			break
		}
		if c+1 < last && h.less(c+1, c) {
			c++
		}
		if !h.less(c, p) {
			break
		}
		h.swap(c, p)
		p = c
	}
	return top
}
