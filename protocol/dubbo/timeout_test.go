package dubbo_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// requireTimeout checks that err is the one timeout type, matching both
// sentinels, and returns it.
func requireTimeout(t *testing.T, err error) *status.TimeoutError {
	t.Helper()
	require.ErrorIs(t, err, status.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, protocol.Retryable(err))
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	return te
}

// TestTimeoutErrorSays: whichever setting ends a call, the caller gets a
// *status.TimeoutError saying how long, which setting and which side.
func TestTimeoutErrorSays(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	g, u := export(t, srv, providerURL("demo.Greeter"))
	defer close(g.release)
	cli := newProtocol(t, nil)
	addr := u.Address()

	// The reference's per-method timeout, as config lays it over the URL.
	inv := refer(t, cli, u.With("Block.timeout", "30").With("Block.timeout.source", "method").
		With(protocol.KeyTimeout, "5000").With(protocol.KeyTimeoutSource, "reference"))
	// Connected first, with the reference's 5 s: since c33e3d0 a call's
	// timeout also bounds its wait for the first dial, and a dial under
	// -race at load took 61 ms, over Block's 30. The invokers below share
	// this connection (one pool per address).
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
	te := requireTimeout(t, err)
	require.EqualError(t, err, "demo.Greeter.Block timed out after 30ms on the consumer calling "+addr+" (method timeout)")
	require.Equal(t, status.Consumer, te.Side)

	// The provider's advertised timeout (no source on the URL).
	inv = refer(t, cli, u.With(protocol.KeyTimeout, "40"))
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
	requireTimeout(t, err)
	require.EqualError(t, err, "demo.Greeter.Block timed out after 40ms on the consumer calling "+addr+" (provider's advertised timeout)")

	// A context deadline sooner than the URL's timeout.
	inv = refer(t, cli, u.With(protocol.KeyTimeout, "5000").With(protocol.KeyTimeoutSource, "reference"))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = inv.Invoke(short, &protocol.Invocation{Method: "Block"})
	te = requireTimeout(t, err)
	require.Equal(t, status.SourceContext, te.Source)
	// How long the context allowed when the call started: under 50 ms,
	// and 0s when a loaded machine ran the call after the deadline
	// (a test run at load 20 saw "after 0s"); below 1 ms in µs.
	require.Regexp(t, `^demo\.Greeter\.Block timed out after (\d+(\.\d+)?(ms|µs|ns)|0s) on the consumer calling `+addr+` \(context deadline\)$`, err.Error())
	require.LessOrEqual(t, te.Timeout, 50*time.Millisecond)
}

// TestProviderTimeoutIsTheSameError: a provider that answers "server
// timeout" gives the caller the same error type as the consumer's own
// timer, with the side and the setting, so the race between the two ends
// no longer changes what the caller reads.
func TestProviderTimeoutIsTheSameError(t *testing.T) {
	ctx := testCtx(t)
	s, err := exchange.NewServer(exchange.HandlerFunc(func(context.Context, *exchange.Request) (*transport.Buffer, error) {
		return nil, &status.Error{Code: status.ServerTimeout, Message: "dubbo: demo.Greeter.Block: context deadline exceeded on the provider"}
	}), nil)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(l) }()
	defer s.Close()
	port := l.Addr().(*net.TCPAddr).Port

	cli := newProtocol(t, nil)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "demo.Greeter", map[string]string{
		protocol.KeyTimeout: "2000", protocol.KeyTimeoutSource: "reference",
	})
	inv := refer(t, cli, u)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
	te := requireTimeout(t, err)
	require.Equal(t, status.Provider, te.Side)
	require.EqualError(t, err, "demo.Greeter.Block timed out after 2s on the provider 127.0.0.1:"+strconv.Itoa(port)+" (reference timeout)")
}

// TestConnLostKeepsItsCause: a response over the consumer's payload limit
// kills the connection; the caller reads why and from which provider, not
// a bare "connection lost".
func TestConnLostKeepsItsCause(t *testing.T) {
	ctx := testCtx(t)
	_, inv, _ := setup(t, nil, &dubboOptions{MaxPayload: 64 << 10})
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Big", Args: []any{100 << 10}})
	require.ErrorIs(t, err, status.ErrConnLost)
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	require.True(t, errors.Is(err, status.ErrConnLost) && protocol.Retryable(err))
	require.ErrorContains(t, err, "connection lost: provider 127.0.0.1:")
	require.ErrorContains(t, err, ": transport: frame too large: body of")
}
