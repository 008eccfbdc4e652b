package dubbo_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
)

// connRecorder is a greeter that counts the calls it gets by the
// consumer's address (one per connection), "Block" calls apart, and holds
// those until hold is closed.
type connRecorder struct {
	*greeter
	mu      sync.Mutex
	addrs   map[string]int // calls but Block
	blocked map[string]int // Block calls
	held    atomic.Int64
	hold    chan struct{}
}

func (r *connRecorder) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	r.mu.Lock()
	hold := r.hold
	if inv.Method == "Block" {
		r.blocked[inv.RemoteAddr.String()]++
	} else {
		r.addrs[inv.RemoteAddr.String()]++
	}
	r.mu.Unlock()
	if inv.Method == "Block" {
		r.held.Add(1)
		<-hold
		return &protocol.Result{Value: "released"}, nil
	}
	return r.greeter.Invoke(ctx, inv)
}

// take returns the calls (Block calls apart) counted by consumer address
// since the last take.
func (r *connRecorder) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.addrs
	r.addrs = map[string]int{}
	return m
}

// takeBlocked is take for Block calls.
func (r *connRecorder) takeBlocked() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.blocked
	r.blocked = map[string]int{}
	return m
}

// TestCallsFillOneConnectionFirst: with several connections per provider,
// calls go to the first connection until it has 16 in flight, and only
// then to the next; a call's end, answered or timed out, makes room again.
func TestCallsFillOneConnectionFirst(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	rec := &connRecorder{greeter: &greeter{u: providerURL("demo.Greeter"), release: make(chan struct{}), started: make(chan struct{}, 1)},
		addrs: map[string]int{}, blocked: map[string]int{}, hold: make(chan struct{})}
	exp, err := srv.Export(rec)
	require.NoError(t, err)
	u := exp.(*dubbo.Exporter).URL().With(protocol.KeyTimeout, "30000")
	inv := refer(t, newProtocol(t, &dubbo.Options{Connections: 4}), u)

	hello := func() {
		t.Helper()
		var s string
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: &s})
		require.NoError(t, err)
		require.Equal(t, "hello x", s)
	}
	for range 20 {
		hello()
	}
	first := rec.take()
	require.Len(t, first, 1, "one caller at a time: one connection")

	// 20 calls held by the provider, started one after another: 16 on the
	// first connection, the 4 after them on a second.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			var s string
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Block", Reply: &s})
			if err == nil && s != "released" {
				t.Errorf("reply %q", s)
			}
			if err != nil {
				t.Error(err)
			}
		})
		require.Eventually(t, func() bool { return rec.held.Load() == int64(i+1) }, testTimeout, time.Millisecond)
	}
	held := rec.takeBlocked()
	require.Len(t, held, 2, "%v", held)
	for a := range first {
		require.Equal(t, 16, held[a], "the first connection takes 16: %v", held)
	}
	rec.mu.Lock()
	close(rec.hold)
	rec.hold = make(chan struct{})
	rec.mu.Unlock()
	wg.Wait()
	for range 20 {
		hello()
	}
	require.Equal(t, first, rec.take(), "answered calls leave the first connection free again")

	// Calls that time out (held by the provider, or not even sent under
	// load) leave room too.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for range 16 {
		wg.Go(func() {
			_, err := inv.Invoke(short, &protocol.Invocation{Method: "Block"})
			if !errors.Is(err, status.ErrTimeout) {
				t.Errorf("want a timeout, got %v", err)
			}
		})
	}
	wg.Wait()
	for range 20 {
		hello()
	}
	require.Equal(t, first, rec.take(), "timed-out calls leave the first connection free again")
	rec.mu.Lock()
	close(rec.hold)
	rec.mu.Unlock()
}
