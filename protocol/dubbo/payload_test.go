package dubbo_test

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

// TestLargePayloadsStayIntact: results of 4 KiB and more are written from
// the method's own array (spliced, not copied into the response), which
// for Bytes and Keep is the argument. Callers keep every reply, the
// provider's Keep method keeps every argument, while other calls' frames
// keep arriving on the same connections; at the end every kept value still
// holds what was sent. Memory reused while a value held it would overwrite
// one (and -race would report the write).
func TestLargePayloadsStayIntact(t *testing.T) {
	p := newProtocol(t, &dubboOptions{Connections: 2})
	// The test is about what arrives, not how soon: the 1 s default
	// call timeout ended calls under -race at load 20.
	g, u := export(t, p, providerURL("demo.InPlace", protocol.KeyTimeout, testTimeoutMillis))
	inv := refer(t, p, u)
	ctx := testCtx(t)
	sizes := []int{0, 10, 581, 4095, 4096, 5000, 20000, 70000}
	var wg sync.WaitGroup
	var sentMu sync.Mutex
	var sent [][]byte
	for c := range 8 {
		wg.Go(func() {
			var want, got [][]byte
			for i := range 40 {
				size := sizes[(c+i)%len(sizes)]
				arg := bytes.Repeat([]byte{byte('a' + (c*7+i)%26)}, size)
				if size > 0 {
					arg[0], arg[size-1] = byte(c), byte(i)
				}
				method := "Bytes"
				if i%2 == 1 {
					method = "Keep"
					sentMu.Lock()
					sent = append(sent, slices.Clone(arg))
					sentMu.Unlock()
				}
				var reply []byte
				_, err := inv.Invoke(ctx, &protocol.Invocation{Method: method, Args: []any{arg}, Reply: &reply})
				if !assert.NoError(t, err) {
					return
				}
				want, got = append(want, arg), append(got, reply)
			}
			for i := range want {
				assert.True(t, bytes.Equal(want[i], got[i]), "caller %d reply %d: %d bytes, want %d", c, i, len(got[i]), len(want[i]))
			}
		})
	}
	wg.Wait()
	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	require.Len(t, g.kept, len(sent))
	key := func(b []byte) string { return string(b) }
	want := make(map[string]int)
	for _, b := range sent {
		want[key(b)]++
	}
	for _, b := range g.kept {
		want[key(b)]--
	}
	for k, n := range want {
		assert.Zero(t, n, "kept argument of %d bytes changed or lost", len(k))
	}
}

// TestLargeReplyIntoCallersSlice: a reply fills the caller's slice when it
// has room, as decoding into a *[]byte does, large or small.
func TestLargeReplyIntoCallersSlice(t *testing.T) {
	p := newProtocol(t, nil)
	_, u := export(t, p, providerURL("demo.InPlace"))
	inv := refer(t, p, u)
	ctx := testCtx(t)
	mine := make([]byte, 0, 64)
	reply := mine
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{[]byte("xyz")}, Reply: &reply})
	require.NoError(t, err)
	require.Equal(t, "xyz", string(reply))
	require.Equal(t, &mine[:1][0], &reply[0], "decoded into the caller's array")

	big := bytes.Repeat([]byte("B"), 10000)
	room := make([]byte, 0, 20000)
	reply = room
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{big}, Reply: &reply})
	require.NoError(t, err)
	require.Equal(t, big, reply)
	require.Equal(t, &room[:1][0], &reply[0], "a large reply fills the caller's array too when it has room")

	reply = nil
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{big}, Reply: &reply})
	require.NoError(t, err)
	require.Equal(t, big, reply)
}
