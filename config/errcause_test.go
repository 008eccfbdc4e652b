package config_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// The tests of this file call through everything a user's call goes
// through (stub, cluster, filters, dubbo, exchange, transport, real TCP on
// 127.0.0.1) and check that the first reason a call failed is still in the
// error the caller gets: errors.Is finds it, whichever layers wrapped it.

const blobInterface = "test.Blob"

// blob answers strings of the size asked for, and counts the calls that
// reached it.
type blob struct{ calls atomic.Int64 }

func (b *blob) Make(_ context.Context, n int) (string, error) {
	b.calls.Add(1)
	return strings.Repeat("x", n), nil
}

func (b *blob) Echo(_ context.Context, s string) (string, error) {
	b.calls.Add(1)
	return s, nil
}

type blobClient struct {
	Make func(ctx context.Context, n int) (string, error)
	Echo func(ctx context.Context, s string) (string, error)
}

// blobApp is an application on reg whose dubbo protocol has opts.
func blobApp(t *testing.T, reg *memory.Registry, opts dubbo.Options, ref config.ReferenceConfig) *config.Application {
	t.Helper()
	c := &config.Config{Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}}}
	if ref.Interface == "" {
		c.Services = map[string]config.ServiceConfig{"blob": {Interface: blobInterface}}
	} else {
		c.References = map[string]config.ReferenceConfig{"blob": ref}
	}
	app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)), config.WithProtocolOptions(opts))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	return app
}

// referBlob refers the blob service on reg into stub, with the consumer's
// protocol options opts.
func referBlob(ctx context.Context, t *testing.T, reg *memory.Registry, opts dubbo.Options, ref config.ReferenceConfig, stub any) {
	t.Helper()
	ref.Interface, ref.Check = blobInterface, true
	if ref.Timeout == 0 {
		ref.Timeout = 30 * time.Second // the failures below must come first
	}
	require.NoError(t, blobApp(t, reg, opts, ref).Refer(ctx, "blob", stub))
}

// TestFrameTooLargeReachesTheCaller: a response over the consumer's
// payload limit kills the connection; the caller reads ErrConnLost and,
// in the same error, transport.ErrFrameTooLarge: why it was lost. A
// request over the consumer's limit is never sent (ErrPayloadTooLarge);
// a response over the provider's limit is answered ErrPayloadTooLarge.
func TestFrameTooLargeReachesTheCaller(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	b := &blob{}
	_, err := blobApp(t, reg, dubbo.Options{MaxPayload: 256 << 10}, config.ReferenceConfig{}).Export(ctx, "blob", b)
	require.NoError(t, err)
	var c blobClient
	referBlob(ctx, t, reg, dubbo.Options{MaxPayload: 64 << 10}, config.ReferenceConfig{Cluster: "failfast"}, &c)

	s, err := c.Make(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, "xxxxxxxxxx", s)

	// Response of 100 KiB: the provider sends it, the consumer refuses it.
	_, err = c.Make(ctx, 100<<10)
	require.ErrorIs(t, err, status.ErrConnLost)
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	require.ErrorContains(t, err, "frame too large: body of")
	require.Equal(t, int64(2), b.calls.Load())
	// The consumer reconnects.
	require.Eventually(t, func() bool {
		_, err := c.Make(ctx, 10)
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	calls := b.calls.Load()

	// Request of 100 KiB: refused before it is written.
	_, err = c.Echo(ctx, strings.Repeat("y", 100<<10))
	require.ErrorIs(t, err, status.ErrPayloadTooLarge)
	require.NotErrorIs(t, err, status.ErrConnLost)

	// Response of 300 KiB: over the provider's own limit, answered with a
	// status instead of sent (the connection lives on).
	_, err = c.Make(ctx, 300<<10)
	require.ErrorIs(t, err, status.ErrPayloadTooLarge)
	var se *status.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, status.PayloadTooLarge, se.Code)
	require.Equal(t, calls+1, b.calls.Load(), "the request that was too large never ran")
}

// badArgClient sends a string where the provider's Make takes an int.
type badArgClient struct {
	Make func(ctx context.Context, n string) (string, error)
}

// badReplyClient expects an int where the provider's Make answers a string.
type badReplyClient struct {
	Make func(ctx context.Context, n int) (int, error)
}

// TestDecodeFailureReachesTheCaller: a request the provider cannot decode
// comes back as ErrBadRequest, a response the consumer cannot decode as
// ErrBadResponse; neither ran twice (they were answered, not lost), and
// neither is mistaken for a lost connection.
func TestDecodeFailureReachesTheCaller(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	b := &blob{}
	_, err := blobApp(t, reg, dubbo.Options{}, config.ReferenceConfig{}).Export(ctx, "blob", b)
	require.NoError(t, err)

	var bad badArgClient
	// The contract check would refuse these stubs at Refer; the calls go
	// out anyway, as they would from a consumer built against an older
	// provider.
	warn := config.ReferenceConfig{Contract: config.ContractWarn}
	referBlob(ctx, t, reg, dubbo.Options{}, warn, &bad)
	_, err = bad.Make(ctx, "ten")
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.NotErrorIs(t, err, status.ErrConnLost)
	var se *status.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, status.BadRequest, se.Code)
	require.Contains(t, se.Message, "argument 0 (int)")
	require.Zero(t, b.calls.Load(), "a request that does not decode does not run")

	var reply badReplyClient
	referBlob(ctx, t, reg, dubbo.Options{}, warn, &reply)
	_, err = reply.Make(ctx, 3)
	require.ErrorIs(t, err, status.ErrBadResponse)
	require.NotErrorIs(t, err, status.ErrConnLost)
	require.Equal(t, int64(1), b.calls.Load(), "an answered call is not retried")
}

// TestResponseOverLimitsReachesTheCaller: a response the consumer refuses
// to decode (attachments over its limits) comes back as ErrBadResponse with
// the decoder's own serialize.ErrLimit in it: the consumer decoded it, so
// the cause is there for the caller to match.
func TestResponseOverLimitsReachesTheCaller(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	many := protocol.FilterFunc(func(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
		res, err := next.Invoke(ctx, inv)
		if res != nil {
			res.Attachments = map[string]string{}
			for i := range serialize.DefaultMapEntries + 1 {
				res.Attachments[strconv.Itoa(i)] = "v"
			}
		}
		return res, err
	})
	prov, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"blob": {Interface: blobInterface}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)), config.WithFilters(config.ProviderFilters(many)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	b := &blob{}
	_, err = prov.Export(ctx, "blob", b)
	require.NoError(t, err)

	var c blobClient
	referBlob(ctx, t, reg, dubbo.Options{}, config.ReferenceConfig{}, &c)
	_, err = c.Make(ctx, 1)
	require.ErrorIs(t, err, status.ErrBadResponse)
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.ErrorContains(t, err, "attachments")
	require.Equal(t, int64(1), b.calls.Load(), "answered, so not retried")
}

// TestSlowPeerReachesTheCaller: a provider that starts a response and
// never finishes it is cut off after the consumer's frame timeout; the
// caller reads ErrConnLost with transport.ErrSlowFrame in it, long before
// its own 30 s timeout.
func TestSlowPeerReachesTheCaller(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	stop := make(chan struct{})
	defer func() { close(stop); _ = l.Close(); <-done }()
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		// Read the request's header, answer with the first half of one.
		var hdr [16]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return
		}
		_, _ = conn.Write(hdr[:8])
		<-stop
	}()
	u := protocol.NewURL("dubbo", "127.0.0.1", l.Addr().(*net.TCPAddr).Port, blobInterface,
		map[string]string{protocol.KeyMethods: "Make,Echo"})
	require.NoError(t, reg.Register(ctx, u))

	var c blobClient
	referBlob(ctx, t, reg, dubbo.Options{FrameTimeout: 200 * time.Millisecond}, config.ReferenceConfig{Cluster: "failfast"}, &c)
	_, err = c.Make(ctx, 1)
	require.ErrorIs(t, err, status.ErrConnLost)
	require.ErrorIs(t, err, transport.ErrSlowFrame)
	require.True(t, protocol.Retryable(err), "sent, no answer: the cluster may retry it")
	require.False(t, errors.Is(err, status.ErrTimeout), "not a timeout: %v", err)
}

// TestStalledPeerReachesTheCaller: a provider that accepts a connection and
// never reads it. The consumer's requests fill the kernel's buffers, then
// its write queue (MaxQueue); calls wait rather than fail while it is
// full, but the next heartbeat finds the queue still full and closes the
// connection as a slow peer: every waiting caller reads
// transport.ErrSlowPeer in its error, with ErrConnLost when its request was
// written (it may have run) or ErrClosed when it was still queued (it did
// not), never a bare "connection lost" nor its own 30 s timeout.
func TestStalledPeerReachesTheCaller(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := l.Accept()
		// One connection only: the consumer's reconnection after the
		// stalled one is closed is refused. (Left listening, the kernel
		// would take it into the backlog, and a caller that came late
		// would wait on it, its one request in the kernel's buffers, until
		// the connection idled out: ErrConnLost "nothing from", no slow
		// peer.)
		_ = l.Close()
		if err == nil {
			accepted <- conn
		}
		close(accepted)
	}()
	defer func() {
		_ = l.Close()
		if conn, ok := <-accepted; ok {
			_ = conn.Close()
		}
	}()
	u := protocol.NewURL("dubbo", "127.0.0.1", l.Addr().(*net.TCPAddr).Port, blobInterface,
		map[string]string{protocol.KeyMethods: "Make,Echo"})
	require.NoError(t, reg.Register(ctx, u))

	var c blobClient
	referBlob(ctx, t, reg, dubbo.Options{MaxQueue: 64 << 10, Heartbeat: 2 * time.Second}, config.ReferenceConfig{Cluster: "failfast"}, &c)
	// 400 calls of 64 KiB: 25 MiB, more than loopback's buffers hold.
	const callers = 400
	arg := strings.Repeat("z", 64<<10)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := c.Echo(ctx, arg)
			errs <- err
		}()
	}
	var lost, notSent, late int
	for range callers {
		err := <-errs
		require.False(t, errors.Is(err, status.ErrTimeout), "not a timeout: %v", err)
		if errors.Is(err, cluster.ErrNoProvider) || errors.Is(err, status.ErrDial) {
			late++ // started after the connection was gone (a slow machine): no provider, or the reconnection refused
			continue
		}
		require.ErrorIs(t, err, transport.ErrSlowPeer, "every caller on the connection reads why it went")
		switch {
		case errors.Is(err, status.ErrConnLost):
			lost++ // written, perhaps read: may have run
		case errors.Is(err, status.ErrClosed):
			notSent++ // still queued: never reached the provider
		default:
			t.Fatalf("neither lost nor closed: %v", err)
		}
	}
	require.Equal(t, callers, lost+notSent+late)
	require.Positive(t, lost, "the requests in the kernel's buffers were sent")
	t.Logf("%d callers lost their written request, %d were not sent, %d came late", lost, notSent, late)
}
