package exchange_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/readhook"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/status"
)

// A provider that sends a response's header and the first 8 KiB of its
// 64 KiB body and then nothing holds up the calls behind it over TLS,
// and over a caller's own tls.Conn (NewClient: what its socket received
// counts as come), as over plain TCP: calls of 100 ms time out behind
// it until it got no byte for a tenth of FrameTimeout (200 ms), then the
// connection is closed, and the response's call and the calls behind it
// fail with the same error on all three, which says how much of the
// body came. (A TLS reader waits for the rest in Go's poller, where it
// is not taking bytes: were it taken for one, the connection would stay
// open until FrameTimeout.)
func TestCallsBehindResponseStalledMidBodyCloseConnection(t *testing.T) {
	const size, part = 64 << 10, 8 << 10
	serverTLS, clientTLS := testcert.SelfSigned(t)
	for _, mode := range []string{"plain", "TLS", "callers-tls.Conn"} {
		t.Run(mode, func(t *testing.T) {
			var cfg *tls.Config
			if mode != "plain" {
				cfg = serverTLS
			}
			addr, _, _ := partialProviderOn(t, cfg, size, part, nil) // the rest never comes
			ctx := testCtx(t)
			opts := &exchange.Options{FrameTimeout: 2 * time.Second}
			var c *exchange.Client
			switch mode {
			case "callers-tls.Conn":
				var d net.Dialer
				nc, err := d.DialContext(ctx, "tcp", addr)
				require.NoError(t, err)
				own := clientTLS.Clone()
				own.ServerName = "127.0.0.1"
				c = exchange.NewClient(tls.Client(nc, own), opts)
				t.Cleanup(func() { c.Close() })
			case "TLS":
				opts.TLS = clientTLS
				fallthrough
			default:
				c = dial(t, addr, opts)
			}
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

// A Client over a caller's own tls.Conn (NewClient): this process does
// not read the socket itself, so bytes that tls.Conn took from it and has
// not decrypted yet are in neither the socket nor what the response got;
// what the kernel received on the socket counts as come instead (on
// Linux). Here a call times out behind a response in progress (the
// rule's first look), then the rest of the response comes and the
// caller's tls.Conn is held after the read that takes it from the
// socket; a second call times out 300 ms later (the rule's floor: its
// timeout, and a tenth of FrameTimeout): the connection stays open
// (before, nothing had come as far as it could tell, and it was cut),
// and the response is read whole once the reader runs.
func TestCallersTLSConnHeldReadIsNotAStall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("what a socket received is told on Linux only")
	}
	// The rest is one TLS record (512 bytes, under what a TLS writer
	// puts in its first records), which one read takes: none of it is
	// decrypted before the hold.
	const size, part = 8<<10 + 512, 8 << 10
	serverTLS, clientTLS := testcert.SelfSigned(t)
	resume := make(chan struct{})
	addr, rest, _ := partialProviderOn(t, serverTLS, size, part, resume)
	ctx := testCtx(t)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	require.NoError(t, err)
	own := &readhook.Conn{TCPConn: nc.(*net.TCPConn)}
	cfg := clientTLS.Clone()
	cfg.ServerName = "127.0.0.1"
	c := exchange.NewClient(tls.Client(own, cfg), &exchange.Options{FrameTimeout: 3 * time.Second})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, echoes(ctx, c, "first"))
	partial := c.Go(ctx, 0, 27, request("partial"))
	require.Eventually(t, func() bool {
		p := c.Reading()
		return p.Frame != 0 && p.Arrived == part && !p.Behind()
	}, 10*time.Second, time.Millisecond, "the header and first part read, the reader waiting for more")
	frame := c.Reading().Frame

	timesOut := func(what string) {
		t.Helper()
		_, err := c.Call(ctx, 300*time.Millisecond, 27, request("late"))
		var te *status.TimeoutError
		require.True(t, errors.As(err, &te), "%s: want its own timeout, got %v", what, err)
		require.NoError(t, c.Err(), "after %s: the connection was closed", what)
	}
	timesOut("the first call")

	held, release := own.Hold(func() bool { return c.Reading().Unread == 0 })
	defer release()
	defer context.AfterFunc(ctx, release)()
	close(rest)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the caller's tls.Conn did not read the rest")
	}
	arrived := c.Reading().Arrived
	timesOut("the second call")
	p := c.Reading()
	require.Equal(t, frame, p.Frame, "the same response in progress")
	require.Equal(t, arrived, p.Arrived, "nothing more of it read")
	require.Zero(t, p.Unread, "the socket is empty")

	release()
	close(resume) // the provider answers the calls that timed out, and those after
	resp, err := partial.Result()
	require.NoError(t, err)
	require.Len(t, exchange.Body(resp), size)
	resp.Release()
	require.NoError(t, echoes(ctx, c, "after"))
	require.Equal(t, uint64(2), c.Late(), "the 2 timed out calls' answers")
	require.NoError(t, c.Err())
}
