package exchange_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// scriptedStaller is a provider on 127.0.0.1 that answers a connection's
// first request with its body (an echo), its second with the header of a
// size-byte response and all of its body but the last byte, sent once
// finish is closed, and later ones with echoes again.
func scriptedStaller(t *testing.T, size int) (addr string, finish chan struct{}) {
	finish = make(chan struct{})
	serve := func(nc net.Conn, quit <-chan struct{}) {
		defer nc.Close()
		for n := 0; ; {
			h, body, err := readFrame(nc)
			if err != nil {
				return
			}
			var hdr [exchange.HeaderSize]byte
			if h.Event {
				continue
			}
			if n++; n != 2 {
				out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: h.Length}
				out.Put(hdr[:])
				if _, err := nc.Write(append(hdr[:], body...)); err != nil {
					return
				}
				continue
			}
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(size)}
			out.Put(hdr[:])
			if _, err := nc.Write(append(hdr[:], make([]byte, size-1)...)); err != nil {
				return
			}
			select {
			case <-finish:
			case <-quit:
				return
			}
			if _, err := nc.Write([]byte{0}); err != nil {
				return
			}
		}
	}
	return fakepeer.Listen(t, serve).String(), finish
}

// A caller that reads its connection (the reading role) and finds the
// response's header over what the ReplyBudget has left stops at its
// deadline like any reading caller, while the response still waits
// unread: its error says so, naming the provider and the limit. The next
// reader charges that response again (its header was read already) once
// there is room, and reads on: the response is counted late, the next
// call is answered, and the budget is empty. A reader that takes up the
// wait and leaves it at its deadline too does not count it again.
func TestReadingCallStopsWaitingForReplyBudget(t *testing.T) {
	const size = 1 << 20
	budget := transport.NewBudget(size + exchange.HeaderSize) // one response in progress
	opts := &exchange.Options{MaxPayload: size, ReplyBudget: budget, FrameTimeout: time.Minute}
	addrA, finishA := scriptedStaller(t, size)
	addrB, finishB := scriptedStaller(t, size)

	// As warmClient, for two clients (one KeepRoleFree, undone after
	// both are closed).
	exchange.KeepRoleFree(t)
	ctx := testCtx(t)
	a, b := dial(t, addrA, opts), dial(t, addrB, opts)
	for _, c := range []*exchange.Client{a, b} {
		_, err := call(ctx, c, "warm")
		require.NoError(t, err)
	}
	// A's second call holds the budget with a response in progress.
	aDone := make(chan error, 1)
	go func() {
		_, err := call(ctx, a, "stall")
		aDone <- err
	}()
	require.Eventually(t, func() bool { return budget.Used() == size+exchange.HeaderSize }, 5*time.Second, time.Millisecond)

	// B's reads its connection, and its response waits for room (its
	// header is read long before the call's second).
	_, err := b.Call(ctx, time.Second, 27, request("stall"))
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	require.ErrorContains(t, err, "its response was not read: the connection to provider "+addrB+" stopped reading because the responses in progress across the consumer held")
	require.ErrorContains(t, err, "ReplyBudget's limit, dubbo.Options.MaxReplyMemory")
	require.Equal(t, uint64(1), b.Led())
	require.Equal(t, uint64(1), b.Stops(), "its deadline stopped its reading")
	require.Equal(t, uint64(1), budget.Throttled())
	require.Equal(t, size+exchange.HeaderSize, budget.Used(), "B's response is not charged")

	// The next reader takes up the same wait and leaves it at its own
	// deadline: still one wait (one response) in Throttled.
	_, err = b.Call(ctx, time.Second, 27, request("again"))
	require.ErrorAs(t, err, &te)
	require.ErrorContains(t, err, "ReplyBudget's limit, dubbo.Options.MaxReplyMemory")
	require.Equal(t, uint64(2), b.Led())
	require.Equal(t, uint64(2), b.Stops(), "its deadline stopped its reading")
	require.Equal(t, uint64(1), budget.Throttled(), "one response's wait, taken up again by the next reader")
	require.Equal(t, size+exchange.HeaderSize, budget.Used(), "B's response is not charged")

	// A's response ends: B's is charged and read by the next reader.
	close(finishA)
	require.NoError(t, <-aDone)
	close(finishB)
	got, err := call(ctx, b, "next")
	require.NoError(t, err)
	require.Equal(t, "next", got)
	require.Equal(t, uint64(2), b.Late(), "the responses of the calls that timed out")
	require.Zero(t, budget.Used())
	require.NoError(t, b.Err())
}

// Responses of up to 4 KiB are never charged; larger ones only while in
// progress: once read, a response held by its caller holds nothing of
// the budget.
func TestReplyBudgetChargesOnlyInProgress(t *testing.T) {
	_, addr := serve(t, newEcho(), nil)
	budget := transport.NewBudget(0)
	c := dial(t, addr, &exchange.Options{ReplyBudget: budget})
	ctx := testCtx(t)
	for _, n := range []int{100, 4<<10 - exchange.HeaderSize, 64 << 10, 1 << 20} {
		resp, err := c.Call(ctx, 0, 27, request(string(make([]byte, n))))
		require.NoError(t, err)
		require.Len(t, exchange.Body(resp), n)
		require.Zero(t, budget.Used(), "a %d-byte response held by its caller", n)
		resp.Release()
	}
	require.Zero(t, budget.Throttled())
}

// A ReplyBudget that cannot hold one response of MaxPayload is refused.
func TestReplyBudgetValidated(t *testing.T) {
	_, err := exchange.Dial(testCtx(t), "127.0.0.1:1", &exchange.Options{ReplyBudget: transport.NewBudget(1 << 20)})
	require.ErrorContains(t, err, "exchange: ReplyBudget's limit 1048576 is less than one response of MaxPayload 8388608")
}
