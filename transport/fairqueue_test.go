package transport_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// TestWaiterRoomReckonedWhenItWaits is TestWaiterRoomFollowsItsAddress
// with the first frame of 127.0.0.2 ending in the window between the
// waiting frame's taking its address's share (2.5 MiB with the first
// frame: over its 2 MiB fair share) and its beginning to wait for the
// budget (a test hook holds it there): no refit can find it then, as it
// is not in the budget's queue yet, so the room it waits with must be
// reckoned from what its address holds when it begins to wait (1 MiB,
// under its share: no room to leave, and it fits the 1.5 MiB free), not
// from what it held when its header was read. (Reckoned from the latter,
// it waited until its reservation turned whole after FrameTimeout, a
// minute here.)
func TestWaiterRoomReckonedWhenItWaits(t *testing.T) {
	const mib = 1 << 20
	k := keeper{kept: make(chan *transport.Buffer, 3)}
	s, addr := serve(t, k, &transport.Options{MaxMemory: 4 * mib, MaxMemoryPerIP: 4*mib - 1, MaxPayload: 2 * mib, FrameTimeout: time.Minute})
	b := s.Budget()
	other := dialFrom(t, "127.0.0.3", addr)
	otherRest := halfFrame(t, other, 1, mib-transport.HeaderSize)
	first := dialFrom(t, "127.0.0.2", addr)
	firstRest := halfFrame(t, first, 2, 3*mib/2-transport.HeaderSize)
	require.Eventually(t, func() bool { return b.Used() == 5*mib/2 }, 10*time.Second, time.Millisecond,
		"both frames in progress charged: %s", transport.BudgetState(b))

	kept := func(what string) *transport.Buffer {
		t.Helper()
		timeout := time.NewTimer(20 * time.Second)
		defer timeout.Stop()
		select {
		case f := <-k.kept:
			return f
		case <-timeout.C:
			t.Fatalf("%s was not read: %s %s", what, transport.BudgetState(b), transport.IPShares(b))
			return nil
		}
	}
	var hooked atomic.Bool
	type result struct {
		f   *transport.Buffer
		err error
	}
	firstDone := make(chan result, 1)
	undo := transport.OnIPTaken(func(need int) {
		if need != mib || !hooked.CompareAndSwap(false, true) {
			return
		}
		// The waiting frame took its address's share: the first frame
		// ends now, before the waiting frame is charged or queued.
		if _, err := first.Write(firstRest); err != nil {
			firstDone <- result{err: err}
			return
		}
		timeout := time.NewTimer(20 * time.Second)
		defer timeout.Stop()
		select {
		case f := <-k.kept:
			firstDone <- result{f: f}
		case <-timeout.C:
			firstDone <- result{err: errors.New("the first frame was not read")}
		}
	})
	defer undo()
	waiter := dialFrom(t, "127.0.0.2", addr)
	waiterFrame := wholeFrame(3, mib-transport.HeaderSize)
	_, err := waiter.Write(waiterFrame[:transport.HeaderSize])
	require.NoError(t, err)
	var r result
	select {
	case r = <-firstDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("the waiting frame's header never took its address's share: %s", transport.IPShares(b))
	}
	require.NoError(t, r.err)
	require.Len(t, r.f.B, 3*mib/2)
	defer r.f.Release()

	go func() { _, _ = waiter.Write(waiterFrame[transport.HeaderSize:]) }() // waits in TCP until read
	f := kept("the waiting frame, its address under its share")
	require.Len(t, f.B, mib)
	f.Release()
	require.Zero(t, s.Reclaimed())
	_, err = other.Write(otherRest)
	require.NoError(t, err)
	f = kept("the other address's frame")
	require.Len(t, f.B, mib)
	f.Release()
}
