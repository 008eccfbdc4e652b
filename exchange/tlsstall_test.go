package exchange_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/status"
)

// A provider that sends a response's header and the first 8 KiB of its
// 64 KiB body and then nothing holds up the calls behind it over TLS as
// over plain TCP: calls of 100 ms time out behind it until it got no
// byte for a tenth of FrameTimeout (200 ms), then the connection is
// closed, the response's call and the calls behind it fail with the
// same error on both, which says how much of the body came. (A TLS
// reader waits for the rest in Go's poller, where it is not taking
// bytes: were it taken for one, the connection would stay open until
// FrameTimeout.)
func TestCallsBehindResponseStalledMidBodyCloseConnection(t *testing.T) {
	const size, part = 64 << 10, 8 << 10
	serverTLS, clientTLS := testcert.SelfSigned(t)
	for _, useTLS := range []bool{false, true} {
		t.Run("TLS="+strconv.FormatBool(useTLS), func(t *testing.T) {
			opts := &exchange.Options{FrameTimeout: 2 * time.Second}
			var cfg *tls.Config
			if useTLS {
				cfg, opts.TLS = serverTLS, clientTLS
			}
			addr, _, _ := partialProviderOn(t, cfg, size, part, nil) // the rest never comes
			ctx := testCtx(t)
			c := dial(t, addr, opts)
			require.NoError(t, echoes(ctx, c, "first"))
			stalled := c.Go(ctx, 0, 27, request("stalled"))
			require.Eventually(t, func() bool {
				p := c.Reading()
				return p.Frame != 0 && p.Arrived == part
			}, 10*time.Second, time.Millisecond, "the header and the first part read")

			callsUntilClosed(ctx, t, c)
			want := "provider " + addr + " sent " + strconv.Itoa(part) + " bytes of a response's body and nothing more for at least"
			require.ErrorIs(t, c.Err(), status.ErrConnLost)
			require.ErrorContains(t, c.Err(), want)
			_, err := stalled.Result()
			require.ErrorIs(t, err, status.ErrConnLost, "the stalled response's call")
			require.ErrorContains(t, err, want)
		})
	}
}

// A TLS provider that answers in full is not taken for one that stopped
// while this process is slow to read its answer: here the reader is
// held after a read(2) took the rest of a response's body (ciphertext)
// from the socket, before tls.Conn decrypts it, for five calls of
// 300 ms that time out behind it, over twice the rule's 500 ms (a tenth
// of FrameTimeout) apart. Nothing of the response is counted read, the
// socket is empty, but a read is under way (Reading's Taking): the
// connection stays open, and once the reader runs the response is read
// whole and the calls after it are answered.
func TestHeldTLSReaderIsNotAStall(t *testing.T) {
	const size, part = 64 << 10, 8 << 10
	serverTLS, clientTLS := testcert.SelfSigned(t)
	resume := make(chan struct{})
	addr, rest, _ := partialProviderOn(t, serverTLS, size, part, resume)
	ctx := testCtx(t)
	c := dial(t, addr, &exchange.Options{TLS: clientTLS, FrameTimeout: 5 * time.Second})
	require.NoError(t, echoes(ctx, c, "first"))
	partial := c.Go(ctx, 0, 27, request("partial"))
	require.Eventually(t, func() bool {
		p := c.Reading()
		return p.Frame != 0 && p.Arrived == part && !p.Behind()
	}, 10*time.Second, time.Millisecond, "the header and first part read, the reader waiting for more")
	frame := c.Reading().Frame

	// The read that leaves the socket empty is held after its read(2).
	held, release := exchange.HoldTakenBytesWhen(t, func() bool { return c.Reading().Unread == 0 })
	// Should the connection be closed meanwhile, its Close waits for the
	// held read(2): the test's deadline releases it, and it fails then.
	defer context.AfterFunc(ctx, release)()
	close(rest)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no counted read took the rest of the response (TLS reads not counted as they leave the socket)")
	}
	arrived := c.Reading().Arrived

	for i := range 5 {
		_, err := c.Call(ctx, 300*time.Millisecond, 27, request("late"))
		var te *status.TimeoutError
		require.True(t, errors.As(err, &te), "call %d: want its own timeout, got %v", i, err)
		require.NoError(t, c.Err(), "after call %d: the connection was closed", i)
		p := c.Reading()
		require.Equal(t, frame, p.Frame, "the same response in progress")
		require.Equal(t, arrived, p.Arrived, "nothing more of it read")
		require.Zero(t, p.Unread, "the socket is empty")
		require.True(t, p.Taking, "a read is under way")
	}

	release()
	close(resume) // the provider answers the calls that timed out, and those after
	resp, err := partial.Result()
	require.NoError(t, err)
	require.Len(t, exchange.Body(resp), size)
	resp.Release()
	require.NoError(t, echoes(ctx, c, "after"))
	require.Equal(t, uint64(5), c.Late(), "the 5 timed out calls' answers")
	require.NoError(t, c.Err())
}
