package exchange_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
)

// TestCallNotQueuedWhenConnectionDies: a call registered just before its
// connection dies, whose frame is then refused by the connection (never
// queued, never sent), while the connection's Closed handler ends the
// calls it finds pending with ErrConnLost ("sent, may have run"), is
// reported as not sent (ErrClosed), never as ErrConnLost, for Call and Go
// alike.
func TestCallNotQueuedWhenConnectionDies(t *testing.T) {
	ctx := testCtx(t)
	e := newEcho()
	_, addr := serve(t, e, nil)
	died := errors.New("test: connection died")
	exchange.AbortWhenRegistered(t, died)

	c := dial(t, addr, nil)
	_, err := call(ctx, c, "lost")
	require.ErrorIs(t, err, status.ErrClosed, "a call never queued")
	require.NotErrorIs(t, err, status.ErrConnLost, "a call never queued reported as sent")
	require.ErrorIs(t, err, died, "the connection's reason is kept")
	require.Zero(t, c.Pending())
	require.Zero(t, c.Timed())

	// The same with a deadline (the call is in the expiry heap too) and
	// for an asynchronous call.
	d := dial(t, addr, nil)
	_, err = d.Call(ctx, 10*time.Second, 27, request("lost"))
	require.ErrorIs(t, err, status.ErrClosed)
	require.NotErrorIs(t, err, status.ErrConnLost)
	require.Zero(t, d.Timed())

	g := dial(t, addr, nil)
	fut := g.Go(ctx, 10*time.Second, 27, request("lost"))
	<-fut.Done()
	_, err = fut.Result()
	require.ErrorIs(t, err, status.ErrClosed)
	require.NotErrorIs(t, err, status.ErrConnLost)
	require.Zero(t, g.Pending())
}
