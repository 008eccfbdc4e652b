package exchange_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
)

// stallPeer accepts one connection, answers its first request (echoing
// the body), and to the second sends the header of a response of bodyLen
// bytes and the first part bytes of its body (nothing at all when bodyLen
// is negative), then nothing more until the test ends. It returns its
// address.
func stallPeer(t *testing.T, bodyLen, part int) string {
	return scriptedPeer(t, 2, true, func(i int, out exchange.Header, body []byte) []byte {
		switch {
		case i == 0:
			return peerFrame(out, body)
		case bodyLen < 0:
			return nil
		}
		out.Length = uint32(bodyLen)
		return peerFrame(out, make([]byte, part))
	})
}

// A caller that reads its own response ends by its deadline even when
// the provider stalls in the middle of a frame: the frame's own bound
// (FrameTimeout, 30 s here) is the connection's, not the call's.
func TestReadingCallEndsByDeadlineMidFrame(t *testing.T) {
	ctx, c := warmClient(t, stallPeer(t, 256<<10, 1<<10), &exchange.Options{FrameTimeout: 30 * time.Second})

	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, 100*time.Millisecond, 27, request("stalled"))
		errc <- err
	}()
	select {
	case err := <-errc:
		var te *status.TimeoutError
		require.ErrorAs(t, err, &te)
	case <-time.After(5 * time.Second):
		t.Fatal("a call of 100 ms still runs after 5 s: its caller reads a frame the provider stalled in")
	}
	require.Equal(t, uint64(1), c.Led())
}

// A caller that reads for long with no context to watch (its deadline
// is the expiry timer's) does not keep the standby goroutine looking at
// every tick: it parks until the role comes back (20 such callers on
// their connections cost the process 25 ms of CPU a second at the 2 ms
// tick), and looks again once the call has ended.
func TestStandbyParksForContextlessReader(t *testing.T) {
	_, c := warmClient(t, stallPeer(t, -1, 0), nil)

	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), time.Second, 27, request("unanswered"))
		errc <- err
	}()
	waitLed(t, c, 1)
	require.Eventually(t, c.Parked, 5*time.Second, 100*time.Microsecond, "no context to watch: no timer")
	var te *status.TimeoutError
	require.ErrorAs(t, <-errc, &te)
	require.False(t, c.Parked())
	require.NoError(t, c.Close())
}

// A reading caller whose context may be cancelled keeps the standby
// goroutine looking: it is not parked.
func TestStandbyWatchesReaderContext(t *testing.T) {
	c, cancel, errc := readingCallToCancel(t, func(x context.Context, _ *exchange.Client) context.Context { return x })
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.False(t, c.Parked())
}

// readingCallToCancel starts, on a warmed client, a call the provider
// holds whose caller reads its own response, under a cancellable context
// that wrap may dress, and returns once the call leads: the client, the
// cancel and where the call's error arrives.
func readingCallToCancel(t *testing.T, wrap func(context.Context, *exchange.Client) context.Context) (*exchange.Client, context.CancelFunc, <-chan error) {
	t.Helper()
	h := newEcho()
	_, addr := serve(t, h, nil)
	_, c := warmClient(t, addr, nil)
	t.Cleanup(func() { close(h.release) }) // runs first: the held call ends before the client and server close
	cctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() {
		_, err := call(wrap(cctx, c), c, "block")
		errc <- err
	}()
	<-h.started
	waitLed(t, c, 1)
	return c, cancel, errc
}

// lockingCtx is a cancellable context whose Err takes the client's lock
// (through Timed), as a user's own Context may call back into the client.
type lockingCtx struct {
	context.Context
	c *exchange.Client
}

func (x lockingCtx) Err() error {
	x.c.Timed()
	return x.Context.Err()
}

// The standby goroutine asks a reading caller's context whether it ended
// without holding the client's lock: a Context whose Err calls into the
// client does not deadlock it, and the cancelled call ends.
func TestStandbyAsksReaderContextUnlocked(t *testing.T) {
	ctx := testCtx(t)
	_, cancel, errc := readingCallToCancel(t, func(x context.Context, c *exchange.Client) context.Context { return lockingCtx{x, c} })
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("the cancelled reading call did not end: the standby goroutine is stuck in the context's Err")
	}
}
