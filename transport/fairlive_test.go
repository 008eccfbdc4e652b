package transport_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// halfFrame writes the header and the first half of a frame of n body
// bytes to c, and returns the rest.
func halfFrame(t *testing.T, c net.Conn, id uint64, n int) (rest []byte) {
	t.Helper()
	f := wholeFrame(id, n)
	_, err := c.Write(f[:len(f)/2])
	require.NoError(t, err)
	return f[len(f)/2:]
}

// TestWaiterRoomFollowsItsAddress: two addresses have frames in progress
// on a 4 MiB budget (a fair share: 2 MiB each). 127.0.0.3's is 1 MiB;
// 127.0.0.2 has 1.5 MiB in progress on one connection, and then a 1 MiB
// frame on a second connection puts its address over its share: that
// frame must leave a share free (2 MiB besides its own 1 MiB, with 1.5
// MiB free) and waits. The first frame of its address then ends (the
// handler keeps it: nothing of the budget is released): its address has
// only the waiting frame in progress, under its share, and the frame
// fits the 1.5 MiB free, so it is read. (Before, its room was reckoned
// once, when its header was read: it waited until its reservation
// turned whole after FrameTimeout, a minute here.)
func TestWaiterRoomFollowsItsAddress(t *testing.T) {
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
	waiter := dialFrom(t, "127.0.0.2", addr)
	waiterFrame := wholeFrame(3, mib-transport.HeaderSize)
	_, err := waiter.Write(waiterFrame[:transport.HeaderSize])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond,
		"the second frame of 127.0.0.2 waits for room: %s", transport.BudgetState(b))
	require.Equal(t, 5*mib/2, b.Used())

	_, err = first.Write(firstRest)
	require.NoError(t, err)
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case f := <-k.kept:
		require.Len(t, f.B, 3*mib/2)
		defer f.Release()
	case <-timeout.C:
		t.Fatalf("the first frame was not read: %s", transport.BudgetState(b))
	}
	go func() { _, _ = waiter.Write(waiterFrame[transport.HeaderSize:]) }() // waits in TCP until read
	select {
	case f := <-k.kept:
		require.Len(t, f.B, mib)
		f.Release()
	case <-timeout.C:
		t.Fatalf("the waiting frame was not let in once its address was under its share: %s", transport.BudgetState(b))
	}
	require.Equal(t, uint64(1), s.Throttled())
	require.Zero(t, s.Reclaimed())
	_, err = other.Write(otherRest)
	require.NoError(t, err)
	select {
	case f := <-k.kept:
		require.Len(t, f.B, mib)
		f.Release()
	case <-timeout.C:
		t.Fatalf("the other address's frame was not read: %s", transport.BudgetState(b))
	}
}
