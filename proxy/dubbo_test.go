package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// loopback exports impl through protocol/dubbo on a free loopback port and
// returns an invoker referring it; everything is closed when t ends.
func loopback(t testing.TB, impl any, params map[string]string) protocol.Invoker {
	t.Helper()
	p, err := dubbo.New(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "demo.Greeter", params)
	provider, err := proxy.NewProvider(u, impl)
	require.NoError(t, err)
	exp, err := p.Export(provider)
	require.NoError(t, err)
	inv, err := p.Refer(exp.(*dubbo.Exporter).URL())
	require.NoError(t, err)
	return inv
}

type remoteClient struct {
	service.Echo
	SayHello func(context.Context, string) (string, error)
	Hello    func(context.Context, string) (string, error) `dubbo:"sayHello"`
	Add      func(context.Context, int32, int32) (int64, error)
	Ping     func(context.Context) error
	Find     func(context.Context, int) (*user, error)
	FindVal  func(context.Context, int) (user, error) `dubbo:"Find"`
	Fail     func(context.Context) error
	Panic    func(context.Context, string) (string, error)
	Missing  func(context.Context, string) (string, error)
	WrongArg func(context.Context, []int) (string, error)          `dubbo:"SayHello"`
	TooMany  func(context.Context, string, string) (string, error) `dubbo:"SayHello"`
}

func TestStubOverDubbo(t *testing.T) {
	ctx := testCtx(t)
	inv := loopback(t, &greeterImpl{}, map[string]string{protocol.KeyVersion: "1.0", protocol.KeyGroup: "g1"})
	var c remoteClient
	require.NoError(t, proxy.Refer(&c, inv))

	s, err := c.SayHello(ctx, "world")
	require.NoError(t, err)
	assert.Equal(t, "hello, world", s)

	s, err = c.Hello(service.WithAttachment(ctx, "tag", "blue"), "bob")
	require.NoError(t, err)
	assert.Equal(t, "hello, bob [blue]", s, "lower-case name and attachments cross the wire")

	n, err := c.Add(ctx, 40, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(42), n)

	require.NoError(t, c.Ping(ctx))

	u, err := c.Find(ctx, 7)
	require.NoError(t, err)
	assert.Equal(t, &user{Name: "ann", Age: 7}, u)
	uv, err := c.FindVal(ctx, 9)
	require.NoError(t, err)
	assert.Equal(t, user{Name: "ann", Age: 9}, uv)

	e, err := c.Echo.Echo(ctx, "ping")
	require.NoError(t, err)
	assert.Equal(t, "ping", e)

	g, err := proxy.NewGeneric(inv)
	require.NoError(t, err)
	v, err := g.Invoke(ctx, "SayHello", []any{"generic"})
	require.NoError(t, err)
	assert.Equal(t, "hello, generic", v)
	v, err = g.Invoke(ctx, "Find", []any{3})
	require.NoError(t, err)
	m, ok := v.(map[string]any)
	require.True(t, ok, "a struct reply decodes as a map without its type, got %T", v)
	assert.Equal(t, "ann", m["Name"])
}

func TestErrorsOverDubbo(t *testing.T) {
	ctx := testCtx(t)
	inv := loopback(t, &greeterImpl{}, nil)
	var c remoteClient
	require.NoError(t, proxy.Refer(&c, inv))

	_, err := c.Find(ctx, 0)
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeNotFound, se.Code)
	assert.Equal(t, "user 0 not found", se.Message)
	assert.True(t, se.Remote)

	err = c.Fail(ctx)
	require.ErrorAs(t, err, &se, "a plain error crosses as a business error with CodeUnknown")
	assert.Equal(t, service.CodeUnknown, se.Code)
	assert.Equal(t, "plain failure", se.Message)
	assert.True(t, se.Remote)

	_, err = c.Panic(ctx, "kaboom")
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodePanic, se.Code)
	assert.NotContains(t, se.Message, "kaboom", "the panic value stays on the provider")
	assert.Contains(t, se.Message, "incident ")
	s, err := c.SayHello(ctx, "after panic")
	require.NoError(t, err, "the provider keeps serving after a panic")
	assert.Equal(t, "hello, after panic", s)

	_, err = c.Missing(ctx, "x")
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	assert.Contains(t, err.Error(), "Missing")
	assert.False(t, protocol.Retryable(err))

	_, err = c.WrongArg(ctx, []int{1})
	require.ErrorIs(t, err, status.ErrBadRequest)
	assert.Contains(t, err.Error(), "SayHello")
	assert.Contains(t, err.Error(), "string")

	_, err = c.TooMany(ctx, "a", "b")
	require.ErrorIs(t, err, status.ErrBadRequest)
	assert.Contains(t, err.Error(), "SayHello")
}

// TestStubOverDubboConcurrent: 50 callers make 20 calls each through one
// stub, every one answered with its own greeting. The calls are bounded by
// the test's 10 s context (the URL's timeout is 30 s), not by the default
// 1 s: this test is about every call being answered right, and under -race
// on a machine loaded with other tests all 50 callers' calls timed out
// together at 1 s.
func TestStubOverDubboConcurrent(t *testing.T) {
	ctx := testCtx(t)
	impl := &greeterImpl{}
	inv := loopback(t, impl, map[string]string{protocol.KeyTimeout: "30000"})
	require.Equal(t, "30000", inv.URL().Param(protocol.KeyTimeout, ""))
	var c remoteClient
	require.NoError(t, proxy.Refer(&c, inv))
	const goroutines, calls = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				name := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("x", g*10))
				s, err := c.SayHello(ctx, name)
				if err == nil && s != "hello, "+name {
					err = fmt.Errorf("got %q for %q", s, name)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	impl.mu.Lock()
	defer impl.mu.Unlock()
	assert.Equal(t, goroutines*calls, impl.calls)
}

// TestPanicRecoveredOnce: a provider method that panics, served by
// protocol/dubbo over TCP, answers its caller a *service.Error with
// CodePanic and an incident id; the provider logs the panic value and the
// stack once, under that id, in whichever layer (proxy, protocol,
// exchange), and keeps serving.
func TestPanicRecoveredOnce(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zap.DebugLevel)
	p, err := dubbo.New(&dubbo.Options{Logger: zap.New(core)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "demo.Greeter", nil)
	provider, err := proxy.NewProvider(u, &greeterImpl{})
	require.NoError(t, err)
	exp, err := p.Export(provider)
	require.NoError(t, err)
	inv, err := dubbo.New(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	ref, err := inv.Refer(exp.(*dubbo.Exporter).URL())
	require.NoError(t, err)
	var c remoteClient
	require.NoError(t, proxy.Refer(&c, ref))

	_, err = c.Panic(ctx, "db password is hunter2")
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodePanic, se.Code)
	assert.True(t, se.Remote)
	assert.NotContains(t, se.Message, "hunter2", "the panic value stays on the provider")
	assert.Regexp(t, `^demo.Greeter.Panic failed on the provider \(server error, incident [0-9a-f]{16}: see the provider's log\)$`, se.Message)

	stacks := logs.FilterFieldKey("stack").All()
	require.Len(t, stacks, 1, "the stack is logged once")
	entry := stacks[0].ContextMap()
	assert.Contains(t, se.Message, entry["incident"].(string))
	assert.Equal(t, "db password is hunter2", entry["panic"])
	assert.Equal(t, "Panic", entry["method"])
	assert.Contains(t, entry["stack"], "greeterImpl).Panic")
	assert.Equal(t, 1, logs.FilterMessageSnippet("panic").Len(), "one log line about the panic")
	assert.Equal(t, uint64(1), p.Stats().Panics)

	s, err := c.SayHello(ctx, "after panic")
	require.NoError(t, err, "the provider keeps serving after a panic")
	assert.Equal(t, "hello, after panic", s)
}

// TestEchoWithToken: $echo is answered by the protocol for a service
// exported through proxy.Provider, after the token check: refused without
// the token, answered with it, and the service is never called.
func TestEchoWithToken(t *testing.T) {
	ctx := testCtx(t)
	for _, token := range []string{"", "s3cret"} {
		t.Run("token="+token, func(t *testing.T) {
			params := map[string]string{}
			if token != "" {
				params[protocol.KeyToken] = token
			}
			inv := loopback(t, &greeterImpl{}, params)
			var c remoteClient
			require.NoError(t, proxy.Refer(&c, inv))
			ctx := ctx
			if token != "" {
				_, err := c.Echo.Echo(ctx, "ping")
				require.ErrorIs(t, err, status.ErrBadRequest)
				require.ErrorContains(t, err, "invalid token: missing token for demo.Greeter.$echo")
				ctx = service.WithAttachment(ctx, protocol.KeyToken, token)
			}
			v, err := c.Echo.Echo(ctx, map[string]any{"k": "v"})
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"k": "v"}, v)
		})
	}
}
