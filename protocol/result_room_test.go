package protocol_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

// TestNewResultRoom: the first NewResult of an invocation is room inside
// it, every later one (also when many ask at once) a Result of its own;
// a copy of an invocation has room of its own until its first NewResult.
func TestNewResultRoom(t *testing.T) {
	inside := func(inv *protocol.Invocation, r *protocol.Result) bool {
		start := uintptr(unsafe.Pointer(inv))
		p := uintptr(unsafe.Pointer(r))
		return p >= start && p < start+unsafe.Sizeof(*inv)
	}
	var inv protocol.Invocation
	cp := inv
	first := inv.NewResult()
	require.True(t, inside(&inv, first), "the first Result is kept in the invocation")
	assert.Equal(t, protocol.Result{}, *first)
	first.Value = "kept"
	second := inv.NewResult()
	assert.False(t, inside(&inv, second))
	assert.NotSame(t, first, second)
	assert.Equal(t, protocol.Result{}, *second)
	assert.Equal(t, "kept", first.Value, "a later Result leaves the first alone")
	assert.True(t, inside(&cp, cp.NewResult()), "a copy made before has its own room")

	var shared protocol.Invocation
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[*protocol.Result]bool{}
	roomed := 0
	for range 16 {
		wg.Go(func() {
			r := shared.NewResult()
			r.Value = 1 // each writes only its own
			mu.Lock()
			defer mu.Unlock()
			got[r] = true
			if inside(&shared, r) {
				roomed++
			}
		})
	}
	wg.Wait()
	assert.Len(t, got, 16)
	assert.Equal(t, 1, roomed)
}
