package transport

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// poolLargeArrays puts buffers with 64 KiB arrays (the largest pooled)
// in the pool, as a busy server leaves it.
func poolLargeArrays() {
	for range 16 {
		f := new(Buffer)
		f.B = make([]byte, 0, maxPooled)
		f.Release()
	}
}

// reservingBudget returns a 4 MiB budget reserved for a waiter of 3 MiB
// (smallCap: 64 KiB), and a connection of it that holds nothing.
func reservingBudget(t *testing.T) (*Budget, *Conn) {
	nc, peer := net.Pipe()
	t.Cleanup(func() { nc.Close(); peer.Close() })
	b := NewBudget(4 << 20)
	b.reserved = &budgetWaiter{need: 3 << 20}
	b.reserving.Store(true)
	b.rc.period = 5 * time.Millisecond
	c := &Conn{nc: nc, budget: b, opts: &Options{FrameTimeout: time.Second}, closing: make(chan struct{})}
	return b, c
}

// TestSmallFrameChargedItsSizeDuringReservation: during a reservation a
// frame of up to 4 KiB (a 100-byte heartbeat) is counted against
// smallCap (64 KiB here), so it must be read into an array of about its
// own size, not a pooled one of up to 64 KiB: one heartbeat charged 64 KiB
// spends smallCap alone, and every small frame after it waits for the
// reservation to end (020c11e). Both ways in: budgetFrame's fast path,
// and a small frame that waited and is granted by a release.
func TestSmallFrameChargedItsSizeDuringReservation(t *testing.T) {
	const body = 100
	t.Run("fast path", func(t *testing.T) {
		b, c := reservingBudget(t)
		for range 20 {
			poolLargeArrays()
			f, err := c.budgetFrame(body, 0)
			require.NoError(t, err)
			require.LessOrEqual(t, cap(f.B), smallFrame, "a %d-byte frame read into a pooled array", HeaderSize+body)
			require.LessOrEqual(t, f.owed, smallFrame, "a %d-byte frame charged", HeaderSize+body)
			f.Release()
		}
		require.Zero(t, b.Used())
	})
	t.Run("granted", func(t *testing.T) {
		b, c := reservingBudget(t)
		// The budget is all but used up, and smallCap spent: the frame
		// waits.
		b.used.Store(b.limit - 8<<10)
		b.smallSpent.Store(b.smallCap())
		for range 5 {
			poolLargeArrays()
			got := make(chan *Buffer, 1)
			go func() {
				f, err := c.budgetFrame(body, 0)
				if err != nil {
					f = nil
				}
				got <- f
			}()
			require.Eventually(t, func() bool {
				b.mu.Lock()
				defer b.mu.Unlock()
				return c.bw.queued
			}, 10*time.Second, time.Millisecond, "the small frame waits")
			// A release makes room for small frames, not for the
			// reserved one.
			b.mu.Lock()
			b.smallSpent.Store(0)
			b.grant()
			b.mu.Unlock()
			var f *Buffer
			select {
			case f = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the small frame was not granted")
			}
			require.NotNil(t, f)
			require.LessOrEqual(t, cap(f.B), smallFrame, "a granted %d-byte frame read into a pooled array", HeaderSize+body)
			require.LessOrEqual(t, f.owed, smallFrame, "a granted %d-byte frame charged", HeaderSize+body)
			f.Release()
			b.smallSpent.Store(b.smallCap())
		}
		require.Equal(t, b.limit-8<<10, int64(b.Used()))
	})
}
