package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// greeterImpl is a provider used by the tests of this package.
type greeterImpl struct {
	mu    sync.Mutex
	calls int
}

func (g *greeterImpl) SayHello(ctx context.Context, name string) (string, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	if tag, ok := service.Attachment(ctx, "tag"); ok {
		return "hello, " + name + " [" + tag + "]", nil
	}
	return "hello, " + name, nil
}

func (g *greeterImpl) Add(_ context.Context, a, b int32) (int64, error) {
	return int64(a) + int64(b), nil
}

func (g *greeterImpl) Ping(context.Context) error { return nil }

func (g *greeterImpl) Find(_ context.Context, id int) (*user, error) {
	if id == 0 {
		return nil, service.Errorf(service.CodeNotFound, "user %d not found", id)
	}
	return &user{Name: "ann", Age: id}, nil
}

func (g *greeterImpl) Fail(context.Context) error { return errors.New("plain failure") }

func (g *greeterImpl) Panic(_ context.Context, msg string) (string, error) { panic(msg) }

// Helper does not fit the service rules and is left out.
func (g *greeterImpl) Helper() string { return "" }

func newProvider(t *testing.T, opts ...proxy.ProviderOption) *proxy.Provider {
	t.Helper()
	p, err := proxy.NewProvider(testURL(), &greeterImpl{}, opts...)
	require.NoError(t, err)
	return p
}

func TestProviderDispatch(t *testing.T) {
	ctx := testCtx(t)
	p := newProvider(t)
	assert.Equal(t, []string{"Add", "Fail", "Find", "Panic", "Ping", "SayHello"}, p.Methods())
	assert.Equal(t, "demo.Greeter", p.URL().Path)

	res, err := p.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"world"}})
	require.NoError(t, err)
	assert.Equal(t, "hello, world", res.Value)

	res, err = p.Invoke(ctx, &protocol.Invocation{Method: "sayHello", Args: []any{"bob"},
		Attachments: map[string]string{"tag": "blue"}})
	require.NoError(t, err)
	assert.Equal(t, "hello, bob [blue]", res.Value, "attachments reach the method's context")

	res, err = p.Invoke(ctx, &protocol.Invocation{Method: "Add", Args: []any{float64(40), 2}})
	require.NoError(t, err, "numbers are converted without loss")
	assert.Equal(t, int64(42), res.Value)

	res, err = p.Invoke(ctx, &protocol.Invocation{Method: "Ping"})
	require.NoError(t, err)
	assert.Nil(t, res.Value)
}

func TestProviderArgTypes(t *testing.T) {
	p := newProvider(t)
	types, ok := p.ArgTypes("Add")
	require.True(t, ok)
	assert.Equal(t, []reflect.Type{reflect.TypeFor[int32](), reflect.TypeFor[int32]()}, types)
	types, ok = p.ArgTypes("Ping")
	require.True(t, ok)
	assert.Empty(t, types)
	_, ok = p.ArgTypes(service.EchoMethod)
	assert.False(t, ok, "the protocol answers $echo, not the provider")
	_, ok = p.ArgTypes("Helper")
	assert.False(t, ok)
	_, ok = p.ArgTypes("Nope")
	assert.False(t, ok)
}

func TestProviderBadInput(t *testing.T) {
	ctx := testCtx(t)
	p := newProvider(t)
	for _, tc := range []struct {
		name   string
		inv    protocol.Invocation
		target error
		want   string
	}{
		{"unknown method", protocol.Invocation{Method: "Nope"}, status.ErrServiceNotFound,
			`demo.Greeter has no method "Nope" (known: Add, Fail, Find, Panic, Ping, SayHello)`},
		{"rejected method", protocol.Invocation{Method: "Helper"}, status.ErrServiceNotFound, `no method "Helper"`},
		{"too few args", protocol.Invocation{Method: "Add", Args: []any{int32(1)}}, status.ErrBadRequest,
			"proxy: demo.Greeter.Add(context.Context, int32, int32) (int64, error) takes 2 arguments after the context, got 1"},
		{"wrong type", protocol.Invocation{Method: "SayHello", Args: []any{42}}, status.ErrBadRequest,
			"demo.Greeter.SayHello(context.Context, string) (string, error): argument 1 is int, want string"},
		{"lossy number", protocol.Invocation{Method: "Add", Args: []any{1.5, 2}}, status.ErrBadRequest,
			"argument 1 is float64, want int32"},
		{"echo", protocol.Invocation{Method: service.EchoMethod, Args: []any{"ping"}}, status.ErrServiceNotFound,
			`demo.Greeter has no method "$echo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Invoke(ctx, &tc.inv)
			assert.Nil(t, res)
			require.ErrorIs(t, err, tc.target)
			assert.Contains(t, err.Error(), tc.want)
			var se *service.Error
			assert.False(t, errors.As(err, &se), "framework errors are not business errors")
		})
	}
}

func TestProviderErrors(t *testing.T) {
	ctx := testCtx(t)
	p := newProvider(t)

	_, err := p.Invoke(ctx, &protocol.Invocation{Method: "Find", Args: []any{0}})
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeNotFound, se.Code)
	assert.Equal(t, "user 0 not found", se.Message)

	_, err = p.Invoke(ctx, &protocol.Invocation{Method: "Fail"})
	assert.EqualError(t, err, "plain failure", "business errors are returned unchanged")

	// A panic goes on to the protocol, the one place that recovers it
	// (see TestPanicRecoveredOnce), and the provider keeps serving.
	assert.PanicsWithValue(t, "kaboom", func() {
		_, _ = p.Invoke(ctx, &protocol.Invocation{Method: "Panic", Args: []any{"kaboom"}})
	})
	res, err := p.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"again"}})
	require.NoError(t, err)
	assert.Equal(t, "hello, again", res.Value)
}

type strictBad struct{}

func (strictBad) Good(context.Context) error { return nil }
func (strictBad) Bad(string) error           { return nil }

func TestNewProviderErrors(t *testing.T) {
	_, err := proxy.NewProvider(nil, &greeterImpl{})
	assert.ErrorContains(t, err, "needs a URL")
	_, err = proxy.NewProvider(testURL(), nil)
	assert.ErrorContains(t, err, "proxy: provider demo.Greeter: service: nil service value")
	_, err = proxy.NewProvider(testURL(), struct{}{})
	assert.ErrorContains(t, err, "has no method of the form")

	_, err = proxy.NewProvider(testURL(), strictBad{})
	require.NoError(t, err, "methods that do not fit are left out")
	_, err = proxy.NewProvider(testURL(), strictBad{}, proxy.Strict())
	assert.ErrorContains(t, err, "method Bad must take context.Context as its first parameter")
	_, err = proxy.NewProvider(testURL(), &greeterImpl{}, proxy.Strict())
	assert.ErrorContains(t, err, "method Helper")
}

// TestStubOverProvider calls a provider in process through a stub: the
// stub and the provider invoker agree without a wire in between.
func TestStubOverProvider(t *testing.T) {
	ctx := testCtx(t)
	p := newProvider(t)
	var c struct {
		SayHello func(context.Context, string) (string, error)
		Add      func(context.Context, int32, int32) (int64, error)
		Find     func(context.Context, int) (*user, error)
		FindVal  func(context.Context, int) (user, error) `dubbo:"Find"`
		Missing  func(context.Context) error
		WrongArg func(context.Context, int) (string, error) `dubbo:"SayHello"`
	}
	require.NoError(t, proxy.Refer(&c, p))

	s, err := c.SayHello(service.WithAttachment(ctx, "tag", "t1"), "world")
	require.NoError(t, err)
	assert.Equal(t, "hello, world [t1]", s)

	n, err := c.Add(ctx, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)

	u, err := c.Find(ctx, 7)
	require.NoError(t, err)
	assert.Equal(t, &user{Name: "ann", Age: 7}, u)
	uv, err := c.FindVal(ctx, 8)
	require.NoError(t, err)
	assert.Equal(t, user{Name: "ann", Age: 8}, uv)

	_, err = c.Find(ctx, 0)
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeNotFound, se.Code)

	assert.ErrorIs(t, c.Missing(ctx), status.ErrServiceNotFound)
	_, err = c.WrongArg(ctx, 3)
	assert.ErrorIs(t, err, status.ErrBadRequest)
	assert.ErrorContains(t, err, "SayHello(context.Context, string) (string, error)")

	g, err := proxy.NewGeneric(p)
	require.NoError(t, err)
	v, err := g.Invoke(ctx, "Add", []any{float64(20), float64(22)})
	require.NoError(t, err)
	assert.Equal(t, int64(42), v)
}

func TestProviderConcurrent(t *testing.T) {
	ctx := testCtx(t)
	impl := &greeterImpl{}
	p, err := proxy.NewProvider(testURL(), impl)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				name := fmt.Sprint(g, i)
				res, err := p.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{name}})
				if err == nil && res.Value != "hello, "+name {
					err = fmt.Errorf("got %v", res.Value)
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
	assert.Equal(t, 800, impl.calls)
}

type incomingImpl struct{ got chan service.Attachments }

func (s *incomingImpl) Peek(ctx context.Context) error {
	s.got <- service.Incoming(ctx)
	return nil
}

// A method sees the call's attachments without the framework's keys:
// none at all when the call carried only framework keys.
func TestProviderIncomingWithoutFrameworkKeys(t *testing.T) {
	impl := &incomingImpl{got: make(chan service.Attachments, 1)}
	p, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 20880, "demo.Peek", nil), impl)
	require.NoError(t, err)
	for name, tc := range map[string]struct{ sent, want map[string]string }{
		"framework only": {map[string]string{protocol.KeyRemoteApplication: "shop", protocol.KeyToken: "secret"}, nil},
		"mixed":          {map[string]string{protocol.KeyRemoteApplication: "shop", "tag": "blue"}, map[string]string{"tag": "blue"}},
		"user only":      {map[string]string{"tag": "blue", "trace": "7"}, map[string]string{"tag": "blue", "trace": "7"}},
		"none":           {nil, nil},
	} {
		_, err := p.Invoke(context.Background(), &protocol.Invocation{Method: "Peek", Attachments: tc.sent})
		require.NoError(t, err, name)
		got := <-impl.got
		if tc.want == nil {
			require.Nil(t, got, name)
			continue
		}
		require.Equal(t, service.Attachments(tc.want), got, name)
		require.Len(t, tc.sent, len(tc.sent), name)
	}
}
