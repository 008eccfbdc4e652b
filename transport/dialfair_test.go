package transport_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/transport"
)

// readCall reads a call's frame from nc and returns its id.
func readCall(nc net.Conn) (uint64, bool) {
	hdr := make([]byte, transport.HeaderSize)
	if _, err := io.ReadFull(nc, hdr); err != nil {
		return 0, false
	}
	_, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(hdr[12:16])))
	return binary.BigEndian.Uint64(hdr[4:12]), err == nil
}

// answers hands the frames a dialed connection reads to a channel.
type answers chan *transport.Buffer

func (a answers) Serve(_ *transport.Conn, f *transport.Buffer) { a <- f }
func (answers) Closed(*transport.Conn, error)                  {}

// TestDialedFairSharePerProvider: a consumer's budget of 4 MiB for the
// answers in progress of its two providers (a fair share: 2 MiB each). A
// hostile provider at 127.0.0.2, dialed twice, begins a 2 MiB answer to a
// call on each connection and stalls; an honest one at 127.0.0.3 answers
// 40 calls with 64 KiB each meanwhile. The hostile provider's second answer would
// put it over its share, so it must leave a share free: it waits, and the
// honest answers are read without a wait for the budget. (Before, the
// two stalled answers held the whole budget, and the honest answers
// waited until the reclaimer cut them, a tenth of FrameTimeout later.)
func TestDialedFairSharePerProvider(t *testing.T) {
	ctx := testCtx(t)
	const big = 2 << 20
	hostile, honest := stallerAndHonest(t, big)
	b := transport.NewBudget(4 << 20)
	opts := &transport.Options{Budget: b, MaxPayload: big, FrameTimeout: 10 * time.Second}
	var hs []*transport.Conn
	for range 2 {
		c, err := transport.Dial(ctx, hostile, answers(make(chan *transport.Buffer, 1)), opts)
		require.NoError(t, err)
		defer c.Close()
		hs = append(hs, c)
	}
	got := answers(make(chan *transport.Buffer, 1))
	c, err := transport.Dial(ctx, honest, got, opts)
	require.NoError(t, err)
	defer c.Close()
	for _, h := range hs {
		require.NoError(t, h.Send(frame(1, "call")))
	}
	// Both hostile answers are charged, or one is and the other waits.
	require.Eventually(t, func() bool { return b.Used() == 2*big || b.Used() == big && (hs[0].Throttled() || hs[1].Throttled()) },
		10*time.Second, time.Millisecond, "the hostile answers begun: %s", transport.BudgetState(b))
	before := b.Throttled()
	for i := range 40 {
		require.NoError(t, c.Send(frame(uint64(i), "call")))
		select {
		case f := <-got:
			require.Len(t, f.B, transport.HeaderSize+64<<10)
			f.Release()
		case <-ctx.Done():
			t.Fatalf("answer %d not read: %s", i, transport.BudgetState(b))
		}
	}
	require.Equal(t, before, b.Throttled(), "honest answers waited for the budget")
	require.Equal(t, uint64(1), before, "the hostile provider's second answer waited for room")
}

// TestDialedProviderCutWaitsItsTurn: a consumer's budget about one answer
// large (a 2 MiB answer and 64 KiB beside it) and two providers. A
// hostile one begins a 2 MiB answer to each call and stalls; its answer
// cannot leave a fair share free, so its room is what it leaves (64 KiB)
// and it is charged whenever the budget is empty; the honest provider's
// 64 KiB answers (and their header) do not fit beside it, and wait until
// the reclaimer cuts it. The hostile provider connects again and is
// called again: marked as cut, its new answer now waits for its turn (a
// whole reservation, FrameTimeout after its patience), and 40 honest
// answers are read meanwhile without a wait for the budget. (Before, the
// new answer was charged at once and the honest answers waited for the
// second cut, a tenth of FrameTimeout later: the consumer read about one
// honest answer per cut.)
func TestDialedProviderCutWaitsItsTurn(t *testing.T) {
	ctx := testCtx(t)
	const big = 2 << 20
	hostile, honest := stallerAndHonest(t, big)
	b := transport.NewBudget(big + 64<<10)
	// The cut comes a tenth of FrameTimeout after the honest answer
	// began to wait; the mark lasts FrameTimeout.
	opts := &transport.Options{Budget: b, MaxPayload: big, FrameTimeout: 10 * time.Second}
	got := answers(make(chan *transport.Buffer, 1))
	c, err := transport.Dial(ctx, honest, got, opts)
	require.NoError(t, err)
	defer c.Close()
	call := func(i int) {
		t.Helper()
		require.NoError(t, c.Send(frame(uint64(i), "call")))
		select {
		case f := <-got:
			require.Len(t, f.B, transport.HeaderSize+64<<10)
			f.Release()
		case <-ctx.Done():
			t.Fatalf("answer %d not read: %s", i, transport.BudgetState(b))
		}
	}
	h1, err := transport.Dial(ctx, hostile, answers(make(chan *transport.Buffer, 1)), opts)
	require.NoError(t, err)
	defer h1.Close()
	require.NoError(t, h1.Send(frame(1, "call")))
	require.Eventually(t, func() bool { return b.Used() == big }, 10*time.Second, time.Millisecond,
		"the hostile answer charged: %s", transport.BudgetState(b))
	call(0) // waits for the cut
	// Counted once the connection closed (its memory given back first).
	require.Eventually(t, func() bool { return b.Reclaimed() == 1 }, 10*time.Second, time.Millisecond,
		"the stalled answer cut: %d", b.Reclaimed())
	require.Equal(t, uint64(1), b.Throttled(), "the honest answer waited for the cut")

	h2, err := transport.Dial(ctx, hostile, answers(make(chan *transport.Buffer, 1)), opts)
	require.NoError(t, err)
	defer h2.Close()
	require.NoError(t, h2.Send(frame(2, "call")))
	// Its new answer is charged (before) or waits (now).
	require.Eventually(t, func() bool { return b.Used() == big || h2.Throttled() }, 10*time.Second, time.Millisecond,
		"the hostile answer begun: %s", transport.BudgetState(b))
	before := b.Throttled() // its wait counted (Throttled is set after)
	for i := 1; i <= 40; i++ {
		call(i)
	}
	require.Equal(t, before, b.Throttled(), "honest answers waited for the budget")
	require.Equal(t, uint64(1), b.Reclaimed(), "the hostile answer was charged and cut again")
	require.True(t, h2.Throttled(), "the hostile answer waits for its turn")
}

// stallerAndHonest starts two fake providers: a hostile one at 127.0.0.2
// that answers the first call on each connection with the header of a
// big-byte answer and nothing more, and an honest one at 127.0.0.3 that
// answers every call with 64 KiB.
func stallerAndHonest(t *testing.T, big int) (hostile, honest string) {
	hostile = fakepeer.ListenOn(t, "127.0.0.2", func(nc net.Conn, _ <-chan struct{}) {
		if id, ok := readCall(nc); ok {
			if _, err := nc.Write(header(id, big-transport.HeaderSize)); err == nil {
				_, _ = io.Copy(io.Discard, nc) // until closed
			}
		}
	}).String()
	honest = fakepeer.ListenOn(t, "127.0.0.3", func(nc net.Conn, _ <-chan struct{}) {
		for {
			id, ok := readCall(nc)
			if !ok {
				return
			}
			if _, err := nc.Write(wholeFrame(id, 64<<10)); err != nil {
				return
			}
		}
	}).String()
	return hostile, honest
}
