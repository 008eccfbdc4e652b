package exchange

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDeadlineHeap pushes and drops calls at random and checks after every
// step that the heap is ordered, that every call knows its slot and that
// popping the soonest gives the deadlines in order.
func TestDeadlineHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h deadlines
	var in []*call
	check := func() {
		t.Helper()
		for i, cl := range h {
			if cl.slot != i {
				t.Fatalf("call at %d says slot %d", i, cl.slot)
			}
			if i > 0 && h[(i-1)/2].deadline > cl.deadline {
				t.Fatalf("heap order broken at %d", i)
			}
		}
		if len(h) != len(in) {
			t.Fatalf("heap holds %d, want %d", len(h), len(in))
		}
	}
	for range 5000 {
		if len(in) == 0 || rng.IntN(3) > 0 {
			cl := &call{slot: -1, deadline: rng.Int64N(100)}
			h.push(cl)
			in = append(in, cl)
		} else {
			i := rng.IntN(len(in))
			h.drop(in[i])
			if in[i].slot != -1 {
				t.Fatal("a dropped call keeps its slot")
			}
			h.drop(in[i]) // a second drop does nothing
			in = slices.Delete(in, i, i+1)
		}
		check()
	}
	var got []int64
	for len(h) > 0 {
		cl := h[0]
		h.drop(cl)
		got = append(got, cl.deadline)
	}
	if !slices.IsSorted(got) || len(got) != len(in) {
		t.Fatalf("popped %d deadlines, sorted %v", len(got), slices.IsSorted(got))
	}
}
