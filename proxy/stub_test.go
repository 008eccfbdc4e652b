package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func testURL() *protocol.URL {
	return protocol.NewURL("dubbo", "127.0.0.1", 20880, "demo.Greeter",
		map[string]string{protocol.KeyVersion: "1.0", protocol.KeyGroup: "g1"})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type greeterClient struct {
	SayHello func(ctx context.Context, name string) (string, error)
	Hi       func(ctx context.Context, name string) (string, error) `dubbo:"sayHello"`
	Add      func(ctx context.Context, a, b int32) (int64, error)
	Ping     func(ctx context.Context) error
	Skipped  func(ctx context.Context) error `dubbo:"-"`
	//lint:ignore U1000 unexported non-func fields are ignored by Refer
	note string
}

// recorder is a fake invoker that records invocations and answers by
// writing into the Reply pointer, as protocol/dubbo does.
type recorder struct {
	mu   sync.Mutex
	invs []protocol.Invocation
	ctxs []context.Context
}

func (r *recorder) invoker() protocol.Invoker {
	return protocol.InvokerFunc{U: testURL(), F: func(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		r.mu.Lock()
		r.invs = append(r.invs, *inv)
		r.ctxs = append(r.ctxs, ctx)
		r.mu.Unlock()
		switch p := inv.Reply.(type) {
		case *string:
			*p = fmt.Sprintf("%s(%v)", inv.Method, inv.Args)
		case *int64:
			*p = int64(inv.Args[0].(int32)) + int64(inv.Args[1].(int32))
		}
		return &protocol.Result{Value: inv.Reply}, nil
	}}
}

func TestReferBuildsInvocations(t *testing.T) {
	ctx := testCtx(t)
	var rec recorder
	var c greeterClient
	require.NoError(t, proxy.Refer(&c, rec.invoker()))
	assert.Nil(t, c.Skipped)

	got, err := c.SayHello(ctx, "world")
	require.NoError(t, err)
	assert.Equal(t, "SayHello([world])", got)

	got, err = c.Hi(service.WithAttachment(ctx, "k", "v"), "bob")
	require.NoError(t, err)
	assert.Equal(t, "sayHello([bob])", got)

	sum, err := c.Add(ctx, 2, 40)
	require.NoError(t, err)
	assert.Equal(t, int64(42), sum)

	require.NoError(t, c.Ping(ctx))

	require.Len(t, rec.invs, 4)
	for _, inv := range rec.invs {
		assert.Equal(t, "demo.Greeter", inv.Service)
		assert.Equal(t, "1.0", inv.Version)
		assert.Equal(t, "g1", inv.Group)
	}
	assert.Equal(t, []any{"world"}, rec.invs[0].Args)
	assert.Nil(t, rec.invs[0].Attachments)
	assert.Equal(t, map[string]string{"k": "v"}, rec.invs[1].Attachments)
	assert.Equal(t, []any{int32(2), int32(40)}, rec.invs[2].Args)
	assert.Equal(t, "Ping", rec.invs[3].Method)
	assert.Empty(t, rec.invs[3].Args)
	assert.Nil(t, rec.invs[3].Reply, "error-only methods have no reply")
	assert.Equal(t, ctx, rec.ctxs[0], "the caller's context reaches the invoker")
}

func TestReferErrorsPassThrough(t *testing.T) {
	ctx := testCtx(t)
	remote := &service.Error{Code: 1001, Message: "no such user", Remote: true}
	inv := protocol.InvokerFunc{U: testURL(), F: func(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if p, ok := inv.Reply.(*string); ok {
			*p = "partial" // a decoder that failed half way
		}
		if inv.Method == "Ping" {
			return nil, fmt.Errorf("call: %w", status.ErrTimeout)
		}
		return nil, remote
	}}
	var c greeterClient
	require.NoError(t, proxy.Refer(&c, inv))

	got, err := c.SayHello(ctx, "x")
	assert.Equal(t, "", got, "the reply is zero on error")
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Same(t, remote, se)
	assert.True(t, se.Remote)
	assert.EqualValues(t, 1001, se.Code)

	err = c.Ping(ctx)
	assert.ErrorIs(t, err, status.ErrTimeout)
}

func TestReferNilContext(t *testing.T) {
	var rec recorder
	var c greeterClient
	require.NoError(t, proxy.Refer(&c, rec.invoker()))
	//nolint:staticcheck // a nil context is the point of the test
	got, err := c.SayHello(nil, "x")
	assert.ErrorIs(t, err, proxy.ErrNilContext)
	assert.Equal(t, "", got)
	//nolint:staticcheck
	assert.ErrorIs(t, c.Ping(nil), proxy.ErrNilContext)
	assert.Empty(t, rec.invs)
}

type user struct {
	Name string
	Age  int
}

func TestReferReplyFromValue(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name  string
		value any
		want  user
		err   error
	}{
		{"value", user{"ann", 3}, user{"ann", 3}, nil},
		{"pointer", &user{"bob", 4}, user{"bob", 4}, nil},
		{"nil pointer", (*user)(nil), user{}, nil},
		{"nil", nil, user{}, nil},
		{"wrong type", "ann", user{}, status.ErrBadResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := protocol.InvokerFunc{U: testURL(), F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
				return &protocol.Result{Value: tc.value}, nil
			}}
			var c struct {
				Get func(context.Context, string) (user, error)
			}
			require.NoError(t, proxy.Refer(&c, inv))
			got, err := c.Get(ctx, "x")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), "demo.Greeter.Get returned string, want proxy_test.user")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	// A nil Result with no error gives a zero reply; numbers are converted.
	inv := protocol.InvokerFunc{U: testURL(), F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if inv.Method == "N" {
			return &protocol.Result{Value: int8(7)}, nil
		}
		return nil, nil
	}}
	var c struct {
		N func(context.Context) (int64, error)
		Z func(context.Context) (string, error)
	}
	require.NoError(t, proxy.Refer(&c, inv))
	n, err := c.N(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(7), n)
	z, err := c.Z(ctx)
	require.NoError(t, err)
	assert.Equal(t, "", z)
}

func TestReferChecks(t *testing.T) {
	var rec recorder
	inv := rec.invoker()
	for _, tc := range []struct {
		name string
		stub any
		want []string
	}{
		{"nil", nil, []string{"stub must be a non-nil pointer to a struct, not nil"}},
		{"not a pointer", greeterClient{}, []string{"not proxy_test.greeterClient"}},
		{"nil pointer", (*greeterClient)(nil), []string{"non-nil pointer"}},
		{"pointer to non-struct", new(int), []string{"not *int"}},
		{"no funcs", &struct{}{}, []string{"no func fields to fill"}},
		{"not a func", &struct{ Name string }{}, []string{"field Name: is a string, not a func"}},
		{"no context", &struct {
			Get func(name string) (string, error)
		}{}, []string{"field Get: func(string) (string, error): the first parameter must be context.Context"}},
		{"no params", &struct{ Get func() error }{}, []string{"field Get: func() error: the first parameter must be context.Context"}},
		{"no results", &struct{ Get func(context.Context) }{}, []string{"field Get: func(context.Context): must return error or (T, error), it returns nothing"}},
		{"last not error", &struct {
			Get func(context.Context) (string, int)
		}{}, []string{"field Get: func(context.Context) (string, int): the last result must be error, not int"}},
		{"too many results", &struct {
			Get func(context.Context) (string, string, error)
		}{}, []string{"field Get: func(context.Context) (string, string, error): too many results (3)"}},
		{"variadic", &struct {
			Get func(context.Context, ...string) error
		}{}, []string{"field Get: func(context.Context, ...string) error is variadic"}},
		{"chan param", &struct {
			Get func(context.Context, chan int) error
		}{}, []string{"field Get: func(context.Context, chan int) error: parameter 1 of type chan int cannot be serialized"}},
		{"func result", &struct {
			Get func(context.Context) (func(), error)
		}{}, []string{"result of type func() cannot be serialized"}},
		{"unexported func", &struct {
			get func(context.Context) error
		}{}, []string{"field get is unexported"}},
		{"every field named", &struct {
			A string
			B func(context.Context) error
			C func() error
		}{}, []string{"field A: is a string", "field C: func() error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := proxy.Refer(tc.stub, inv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "proxy: refer")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// Nothing is filled when any field is wrong.
	partial := struct {
		Good func(context.Context) error
		Bad  int
	}{}
	require.Error(t, proxy.Refer(&partial, inv))
	assert.Nil(t, partial.Good)

	require.ErrorContains(t, proxy.Refer(&greeterClient{}, nil), "nil invoker")
	require.ErrorContains(t, proxy.Refer(&greeterClient{}, protocol.InvokerFunc{}), "no URL")
}

func TestReferEmbedded(t *testing.T) {
	ctx := testCtx(t)
	var rec recorder
	var c struct {
		service.Echo
		Inner    struct{ X int } `dubbo:"-"`
		SayHello func(context.Context, string) (string, error)
	}
	require.NoError(t, proxy.Refer(&c, rec.invoker()))
	require.NotNil(t, c.Echo.Echo)
	_, err := c.Echo.Echo(ctx, "ping")
	require.NoError(t, err)
	require.Len(t, rec.invs, 1)
	assert.Equal(t, service.EchoMethod, rec.invs[0].Method)
	assert.Equal(t, []any{"ping"}, rec.invs[0].Args)

	var bad struct {
		service.Echo
		Inner struct{ X int }
	}
	err = proxy.Refer(&bad, rec.invoker())
	assert.ErrorContains(t, err, "field Inner: is a struct { X int }, not a func")
}

func TestReferConcurrent(t *testing.T) {
	ctx := testCtx(t)
	var rec recorder
	var c greeterClient
	require.NoError(t, proxy.Refer(&c, rec.invoker()))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				name := fmt.Sprintf("g%d-%d", g, i)
				got, err := c.SayHello(ctx, name)
				if err == nil && got != "SayHello(["+name+"])" {
					err = fmt.Errorf("got %q for %q", got, name)
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
	assert.Len(t, rec.invs, 16*50)
}

func TestGenericOverFake(t *testing.T) {
	ctx := testCtx(t)
	var rec recorder
	g, err := proxy.NewGeneric(rec.invoker())
	require.NoError(t, err)
	_, err = g.Invoke(service.WithAttachment(ctx, "a", "b"), "SayHello", []any{"x"})
	require.NoError(t, err)
	require.Len(t, rec.invs, 1)
	inv := rec.invs[0]
	assert.Equal(t, "demo.Greeter", inv.Service)
	assert.Equal(t, "1.0", inv.Version)
	assert.Equal(t, "g1", inv.Group)
	assert.Equal(t, "SayHello", inv.Method)
	assert.Equal(t, []any{"x"}, inv.Args)
	assert.Nil(t, inv.Reply)
	assert.Equal(t, map[string]string{"a": "b"}, inv.Attachments)

	_, err = g.Invoke(ctx, "", nil)
	assert.ErrorContains(t, err, "empty method name")
	//lint:ignore SA1012 a nil context must be refused
	_, err = g.Invoke(nil, "X", nil)
	assert.ErrorIs(t, err, proxy.ErrNilContext)
	_, err = proxy.NewGeneric(nil)
	assert.Error(t, err)
	_, err = proxy.NewGeneric(protocol.InvokerFunc{})
	assert.Error(t, err)

	boom := errors.New("boom")
	g, err = proxy.NewGeneric(protocol.InvokerFunc{U: testURL(), F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return nil, boom
	}})
	require.NoError(t, err)
	_, err = g.Invoke(ctx, "X", nil)
	assert.Same(t, boom, err)
}

// TestStubAllocs guards the consumer stub's allocation budget: one frame
// for invocation, arguments and reply, plus the fake's own Result; through
// reflect.MakeFunc (fields of other shapes), 3 more to pass a context and a
// string in.
func TestStubAllocs(t *testing.T) {
	var inv protocol.Invoker = protocol.InvokerFunc{U: testURL(), F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		*inv.Reply.(*string) = "ok"
		return &protocol.Result{Value: inv.Reply}, nil
	}}
	var c struct {
		Echo func(context.Context, string) (string, error)
	}
	require.NoError(t, proxy.Refer(&c, inv))
	ctx := testCtx(t)
	allocs := testing.AllocsPerRun(200, func() {
		if s, err := c.Echo(ctx, "hello"); err != nil || s != "ok" {
			t.Fatal(s, err)
		}
	})
	assert.LessOrEqual(t, allocs, 2.0, "allocations per stub call, fake invoker included")

	proxy.SetReflectiveStubs(true)
	defer proxy.SetReflectiveStubs(false)
	require.NoError(t, proxy.Refer(&c, inv))
	allocs = testing.AllocsPerRun(200, func() {
		if s, err := c.Echo(ctx, "hello"); err != nil || s != "ok" {
			t.Fatal(s, err)
		}
	})
	assert.LessOrEqual(t, allocs, 5.0, "allocations per reflective stub call, fake invoker included")
}
