package dubbo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func TestEcho(t *testing.T) {
	ctx := testCtx(t)
	g, inv, _ := setup(t, nil, nil)
	for _, v := range []any{"ping", int64(42), map[string]any{"k": []any{true}}} {
		res, err := inv.Invoke(ctx, &protocol.Invocation{Method: service.EchoMethod, Args: []any{v}})
		require.NoError(t, err)
		require.Equal(t, v, res.Value)
	}
	require.Zero(t, g.calls.Load(), "answered by the protocol")
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: service.EchoMethod, Args: []any{1, 2}})
	require.ErrorIs(t, err, status.ErrBadRequest)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Service: "demo.Nope", Method: service.EchoMethod, Args: []any{1}})
	require.ErrorIs(t, err, status.ErrServiceNotFound)
}

func TestAttachmentsBothWays(t *testing.T) {
	ctx := testCtx(t)
	_, inv, _ := setup(t, nil, nil)
	// The invocation's attachments travel; the context's are the stub's
	// to read (proxy), not the protocol's.
	actx := service.WithAttachment(ctx, "trace", "ctx")
	res, err := inv.Invoke(actx, &protocol.Invocation{Method: "Attach", Args: []any{"trace"}, Attachments: map[string]string{"trace": "abc"}})
	require.NoError(t, err)
	require.Equal(t, "abc", res.Value)
	require.Equal(t, map[string]string{"back": "yes"}, res.Attachments)
}

func TestTimeouts(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	g, u := export(t, srv, providerURL("demo.Greeter"))
	defer close(g.release)
	cli := newProtocol(t, nil)
	// Connected first, with the test's timeout: a call's timeout (and its
	// context's deadline) also bounds its wait for the first dial, which
	// under -race at load can take longer than the 30 ms below. The
	// invokers below share this connection (one pool per address).
	_, err := refer(t, cli, u.With(protocol.KeyTimeout, testTimeoutMillis)).
		Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)

	// The context's deadline.
	inv := refer(t, cli, u)
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = inv.Invoke(short, &protocol.Invocation{Method: "Block"})
	require.ErrorIs(t, err, status.ErrTimeout)
	require.True(t, protocol.Retryable(err))

	// The URL's per-method timeout, without a context deadline.
	inv = refer(t, cli, u.With("Block.timeout", "30").With(protocol.KeyTimeout, "5000"))
	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "Block"})
	require.ErrorIs(t, err, status.ErrTimeout)

	// The provider sees the deadline.
	res, err := inv.Invoke(context.Background(), &protocol.Invocation{Method: "Deadline"})
	require.NoError(t, err)
	require.Greater(t, res.Value, int64(0))
	require.LessOrEqual(t, res.Value, int64(5000))

	// A method timeout that is not a positive integer (from a registry
	// anyone may write to) is ignored: the service timeout applies.
	inv = refer(t, cli, u.With("Block.timeout", "soon").With(protocol.KeyTimeout, "30"))
	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "Block"})
	require.ErrorIs(t, err, status.ErrTimeout)
}

func TestServicesShareAPort(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	_, u1 := export(t, srv, providerURL("demo.Greeter", protocol.KeyVersion, "1.0"))
	onPort := func(u *protocol.URL) *protocol.URL {
		return protocol.NewURL("dubbo", u.Host, u1.Port, u.Path, u.Params())
	}
	_, u2 := export(t, srv, onPort(providerURL("demo.Greeter", protocol.KeyVersion, "2.0", protocol.KeyGroup, "blue")))
	_, u3 := export(t, srv, protocol.NewURL("dubbo", "127.0.0.1", u1.Port, "demo.Other", nil))
	require.Equal(t, u1.Port, u2.Port)
	require.Equal(t, u1.Port, u3.Port)
	_, err := srv.Export(&greeter{u: onPort(providerURL("demo.Greeter", protocol.KeyVersion, "1.0"))})
	require.ErrorContains(t, err, "already exported")
	// Port 0 is a new free port, even for a service the protocol serves.
	_, u4 := export(t, srv, providerURL("demo.Greeter", protocol.KeyVersion, "1.0"))
	require.NotEqual(t, u1.Port, u4.Port)

	cli := newProtocol(t, nil)
	for _, u := range []*protocol.URL{u1, u2, u3} {
		res, err := refer(t, cli, u).Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{u.ServiceKey()}})
		require.NoError(t, err)
		require.Equal(t, "hello "+u.ServiceKey(), res.Value)
	}
}

func TestUnexport(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	g1 := &greeter{u: providerURL("demo.A")}
	e1, err := srv.Export(g1)
	require.NoError(t, err)
	port := e1.(*dubbo.Exporter).URL().Port
	e2, err := srv.Export(&greeter{u: protocol.NewURL("dubbo", "127.0.0.1", port, "demo.B", nil)})
	require.NoError(t, err)
	cli := newProtocol(t, nil)
	a := refer(t, cli, e1.Invoker().URL())
	b := refer(t, cli, e2.Invoker().URL())
	require.NoError(t, e1.Unexport())
	require.NoError(t, e1.Unexport())
	_, err = a.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	_, err = b.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
	require.NoError(t, e2.Unexport())
	// The port is closed with its last service.
	_, err = b.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.Error(t, err)
}

func TestReconnect(t *testing.T) {
	ctx := testCtx(t)
	srv, err := dubbo.New(nil)
	require.NoError(t, err)
	_, u := export(t, srv, providerURL("demo.Greeter"))
	cli := newProtocol(t, &dubbo.Options{Reconnect: 10 * time.Millisecond, MaxReconnect: 50 * time.Millisecond})
	inv := refer(t, cli, u)
	require.True(t, protocol.IsAvailable(inv), "available before the first dial")
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)

	require.NoError(t, srv.Close())
	require.Eventually(t, func() bool { return !protocol.IsAvailable(inv) }, 5*time.Second, time.Millisecond)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.Error(t, err)
	require.True(t, protocol.Retryable(err), "%v", err)

	// The provider comes back on the same port.
	srv2 := newProtocol(t, nil)
	export(t, srv2, u)
	require.Eventually(t, func() bool { return protocol.IsAvailable(inv) }, 5*time.Second, time.Millisecond)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"back"}})
	require.NoError(t, err)
	require.Equal(t, "hello back", res.Value)
}

func TestDialFailureIsRetryable(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	_, u := export(t, srv, providerURL("demo.Greeter"))
	require.NoError(t, srv.Close())
	inv := refer(t, newProtocol(t, &dubbo.Options{DialTimeout: time.Second}), u)
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrDial)
	require.True(t, protocol.Retryable(err))
	require.False(t, protocol.IsAvailable(inv))
}

func TestGracefulShutdownReadOnly(t *testing.T) {
	ctx := testCtx(t)
	srv, err := dubbo.New(nil)
	require.NoError(t, err)
	g, u := export(t, srv, providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u)
	inflight := make(chan error, 1)
	go func() {
		res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
		if err == nil && res.Value != "released" {
			err = fmt.Errorf("got %v", res.Value)
		}
		inflight <- err
	}()
	<-g.started
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	require.Eventually(t, func() bool { return !protocol.IsAvailable(inv) }, 5*time.Second, time.Millisecond)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrReadOnly)
	require.True(t, protocol.Retryable(err))
	close(g.release)
	require.NoError(t, <-inflight)
	require.NoError(t, <-shut)
}

func TestJSONSerialization(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	_, u := export(t, srv, providerURL("demo.Greeter", protocol.KeySerialization, "json"))
	inv := refer(t, newProtocol(t, nil), u)
	var p Person
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Greet", Args: []any{Person{Name: "j", Age: 1}}, Reply: &p})
	require.NoError(t, err)
	require.Equal(t, Person{Name: "dear j", Age: 2}, p)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Fail", Args: []any{"x"}})
	require.ErrorIs(t, err, &service.Error{Code: service.CodeNotFound})

	_, err = newProtocol(t, nil).Refer(u.With(protocol.KeySerialization, "kryo"))
	require.ErrorContains(t, err, `unknown serialization "kryo" (known: json, msgpack)`)
	_, err = srv.Export(&greeter{u: providerURL("demo.X", protocol.KeySerialization, "kryo")})
	require.ErrorContains(t, err, "kryo")
}

// untyped is an invoker without ArgTypes: arguments arrive as plain values.
type untyped struct{ u *protocol.URL }

func (x untyped) URL() *protocol.URL { return x.u }
func (x untyped) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	return &protocol.Result{Value: fmt.Sprintf("%T %v", inv.Args[0], inv.Args[0])}, nil
}

func TestInvokerWithoutArgTypes(t *testing.T) {
	ctx := testCtx(t)
	exp, err := newProtocol(t, nil).Export(untyped{u: providerURL("demo.Untyped")})
	require.NoError(t, err)
	inv := refer(t, newProtocol(t, nil), exp.Invoker().URL())
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Anything", Args: []any{7}})
	require.NoError(t, err)
	require.Equal(t, "int64 7", res.Value)
}

// TestManyCallersManyConnections: 100 callers over two invokers sharing
// three connections make 1,000 calls, each answered with its own sum. The
// call timeout is widened from the default 1 s, which a loaded machine
// (other tests, other processes, the race detector) exceeds now and then
// (seen: a dozen calls timed out with the load average at 22): this test
// is about every call being answered right, not about speed.
func TestManyCallersManyConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := newProtocol(t, nil)
	g, u := export(t, srv, providerURL("demo.Greeter"))
	u = u.With(protocol.KeyTimeout, "30000")
	cli := newProtocol(t, &dubbo.Options{Connections: 3})
	a := refer(t, cli, u)
	b := refer(t, cli, u) // shares a's connections
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		inv := a
		if i%2 == 1 {
			inv = b
		}
		wg.Go(func() {
			for j := range 10 {
				var sum int
				_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Add", Args: []any{i, j}, Reply: &sum})
				if err == nil && sum != i+j {
					err = fmt.Errorf("%d+%d = %d", i, j, sum)
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
	require.Equal(t, int64(1000), g.calls.Load())
}

func TestServerBusy(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, &dubbo.Options{MaxConcurrent: 1})
	g, u := export(t, srv, providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u)
	done := make(chan error, 1)
	go func() {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
		done <- err
	}()
	<-g.started
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrServerBusy)
	require.True(t, protocol.Retryable(err))
	close(g.release)
	require.NoError(t, <-done)
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []dubbo.Options{{Connections: -1}, {MaxPayload: -1}, {Heartbeat: -1}, {MaxConcurrent: -1}, {DialTimeout: -1}, {Reconnect: -1}} {
		_, err := dubbo.New(&o)
		require.Error(t, err)
	}
	p := newProtocol(t, nil)
	_, err := p.Refer(protocol.NewURL("dubbo", "", 0, "demo.X", nil))
	require.ErrorContains(t, err, "host:port")
	_, err = p.Export(protocol.InvokerFunc{})
	require.Error(t, err)
}

// GreeterService and GreeterClient exercise the proxy package end to end.
type GreeterService struct{}

func (GreeterService) SayHello(_ context.Context, name string) (string, error) {
	return "hello " + name, nil
}

func (GreeterService) Greet(_ context.Context, p Person, times int) (Person, error) {
	if times < 0 {
		return Person{}, service.Errorf(service.CodeInvalidArgument, "times %d < 0", times)
	}
	return Person{Name: p.Name, Age: p.Age * times}, nil
}

type GreeterClient struct {
	service.Echo
	SayHello func(ctx context.Context, name string) (string, error)
	Greet    func(ctx context.Context, p Person, times int) (Person, error)
}

func TestWithProxy(t *testing.T) {
	ctx := testCtx(t)
	u := providerURL("demo.Greeter", protocol.KeyVersion, "1.0")
	prov, err := proxy.NewProvider(u, GreeterService{})
	require.NoError(t, err)
	filtered := protocol.Chain(prov, protocol.FilterFunc(func(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
		return next.Invoke(ctx, inv)
	}))
	exp, err := newProtocol(t, nil).Export(filtered)
	require.NoError(t, err)
	var c GreeterClient
	require.NoError(t, proxy.Refer(&c, refer(t, newProtocol(t, nil), exp.Invoker().URL())))

	s, err := c.SayHello(ctx, "proxy")
	require.NoError(t, err)
	require.Equal(t, "hello proxy", s)
	p, err := c.Greet(ctx, Person{Name: "n", Age: 2}, 3)
	require.NoError(t, err)
	require.Equal(t, Person{Name: "n", Age: 6}, p)
	_, err = c.Greet(ctx, Person{}, -1)
	require.ErrorIs(t, err, &service.Error{Code: service.CodeInvalidArgument})
	v, err := c.Echo.Echo(ctx, "ping")
	require.NoError(t, err)
	require.Equal(t, "ping", v)
}
