package service_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/service"
)

type greeter struct{ prefix string }

func (g *greeter) SayHello(ctx context.Context, name string) (string, error) {
	return g.prefix + name, nil
}
func (g *greeter) Add(_ context.Context, a, b int32) (int64, error) { return int64(a) + int64(b), nil }
func (g *greeter) Ping(context.Context) error                       { return nil }
func (g *greeter) Fail(context.Context, string) error               { return errors.New("boom") }
func (g *greeter) NoContext(name string) (string, error)            { return name, nil }
func (g *greeter) NoError(context.Context) string                   { return "" }
func (g *greeter) ThreeResults(context.Context) (int, int, error)   { return 0, 0, nil }
func (g *greeter) Variadic(context.Context, ...string) error        { return nil }
func (g *greeter) Chan(context.Context, chan int) error             { return nil }
func (g *greeter) ReturnsFunc(context.Context) (func(), error)      { return nil, nil }

//lint:ignore U1000 the method table must leave unexported methods out
func (g *greeter) unexported(context.Context) error { return nil }

type allBad struct{}

func (allBad) Get(name string) string { return name }

type ptrOnly struct{}

func (*ptrOnly) Get(context.Context) error { return nil }

func TestTableMethods(t *testing.T) {
	tbl, err := service.TableOf(reflect.TypeFor[*greeter]())
	require.NoError(t, err)
	assert.Equal(t, []string{"Add", "Fail", "Ping", "SayHello"}, tbl.Names())

	m, ok := tbl.Method("SayHello")
	require.True(t, ok)
	assert.Equal(t, []reflect.Type{reflect.TypeFor[string]()}, m.ArgTypes)
	assert.Equal(t, reflect.TypeFor[string](), m.ReplyType)
	assert.Equal(t, "SayHello(context.Context, string) (string, error)", m.Signature())

	alias, ok := tbl.Method("sayHello")
	require.True(t, ok, "lower-case alias")
	assert.Same(t, m, alias)

	p, ok := tbl.Method("Ping")
	require.True(t, ok)
	assert.Empty(t, p.ArgTypes)
	assert.Nil(t, p.ReplyType)
	assert.Equal(t, "Ping(context.Context) error", p.Signature())

	_, ok = tbl.Method("NoContext")
	assert.False(t, ok)
}

func TestTableRejected(t *testing.T) {
	tbl, err := service.TableOf(reflect.TypeFor[*greeter]())
	require.NoError(t, err)
	want := []service.Rejected{
		{"Chan", "has parameter 1 of type chan int, which cannot be serialized"},
		{"NoContext", "must take context.Context as its first parameter"},
		{"NoError", "must return error as its last result"},
		{"ReturnsFunc", "returns func(), which cannot be serialized"},
		{"ThreeResults", "must return (T, error) or error, not 3 results"},
		{"Variadic", "is variadic"},
	}
	assert.Equal(t, want, tbl.Rejected())
	err = tbl.Strict()
	require.Error(t, err)
	for _, r := range want {
		assert.Contains(t, err.Error(), "method "+r.Method+" "+r.Reason)
	}
}

func TestTableNoMethodFits(t *testing.T) {
	_, err := service.TableFor(allBad{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "service_test.allBad has no method")
	assert.Contains(t, err.Error(), "method Get must take context.Context as its first parameter")

	_, err = service.TableFor(ptrOnly{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pass a pointer")

	tbl, err := service.TableFor(&ptrOnly{})
	require.NoError(t, err)
	assert.NoError(t, tbl.Strict())

	_, err = service.TableFor(nil)
	assert.Error(t, err)
	_, err = service.TableOf(nil)
	assert.Error(t, err)
	_, err = service.TableFor(42)
	assert.ErrorContains(t, err, "type int has no method")
}

func TestTableCached(t *testing.T) {
	a, err := service.TableFor(&greeter{})
	require.NoError(t, err)
	b, err := service.TableFor(&greeter{prefix: "x"})
	require.NoError(t, err)
	assert.Same(t, a, b)
	_, err1 := service.TableFor(allBad{})
	_, err2 := service.TableFor(allBad{})
	assert.Same(t, err1, err2)
}

func TestMethodCall(t *testing.T) {
	ctx := t.Context()
	g := &greeter{prefix: "hello, "}
	tbl, err := service.TableFor(g)
	require.NoError(t, err)
	rcvr := reflect.ValueOf(g)

	m, _ := tbl.Method("SayHello")
	args, err := m.Args([]any{"world"})
	require.NoError(t, err)
	v, err := m.Call(ctx, rcvr, args)
	require.NoError(t, err)
	assert.Equal(t, "hello, world", v)

	m, _ = tbl.Method("Fail")
	args, err = m.Args([]any{"x"})
	require.NoError(t, err)
	v, err = m.Call(ctx, rcvr, args)
	assert.Nil(t, v)
	assert.EqualError(t, err, "boom")

	m, _ = tbl.Method("Ping")
	args, err = m.Args(nil)
	require.NoError(t, err)
	v, err = m.Call(ctx, rcvr, args)
	assert.Nil(t, v)
	assert.NoError(t, err)

	// Args of another method, or none, are refused.
	_, err = m.Call(ctx, rcvr, service.Args{})
	assert.ErrorContains(t, err, "Ping called with arguments not from its Args")
	hello, _ := tbl.Method("SayHello")
	args, err = hello.Args([]any{"x"})
	require.NoError(t, err)
	_, err = m.Call(ctx, rcvr, args)
	assert.Error(t, err)
}

func TestMethodArgs(t *testing.T) {
	tbl, err := service.TableFor(&greeter{})
	require.NoError(t, err)
	add, _ := tbl.Method("Add")
	hello, _ := tbl.Method("SayHello")

	for _, tc := range []struct {
		name string
		m    *service.Method
		args []any
		want string // error substring, "" for success
	}{
		{"exact", add, []any{int32(1), int32(2)}, ""},
		{"json numbers", add, []any{float64(1), float64(2)}, ""},
		{"int to int32", add, []any{1, 2}, ""},
		{"too few", add, []any{int32(1)}, "Add(context.Context, int32, int32) (int64, error) takes 2 arguments after the context, got 1"},
		{"too many", hello, []any{"a", "b"}, "takes 1 argument after the context, got 2"},
		{"fraction", add, []any{1.5, 2}, "argument 1 is float64, want int32"},
		{"overflow", add, []any{int64(1) << 40, 2}, "argument 1 is int64, want int32"},
		{"wrong type", hello, []any{42}, "SayHello(context.Context, string) (string, error): argument 1 is int, want string"},
		{"nil for string", hello, []any{nil}, "argument 1 is nil, want string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := tc.m.Args(tc.args)
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			v, err := tc.m.Call(t.Context(), reflect.ValueOf(&greeter{}), vs)
			require.NoError(t, err)
			assert.Equal(t, int64(3), v)
		})
	}
}

type nilable struct{}

func (nilable) Take(_ context.Context, p *int, s []string, m map[string]int, a any) (bool, error) {
	return p == nil && s == nil && m == nil && a == nil, nil
}

func (nilable) Unsigned(_ context.Context, u uint8) (uint8, error) { return u, nil }

func TestMethodArgsNilAndSign(t *testing.T) {
	tbl, err := service.TableFor(nilable{})
	require.NoError(t, err)
	m, _ := tbl.Method("Take")
	vs, err := m.Args([]any{nil, nil, nil, nil})
	require.NoError(t, err)
	v, err := m.Call(t.Context(), reflect.ValueOf(nilable{}), vs)
	require.NoError(t, err)
	assert.Equal(t, true, v)

	u, _ := tbl.Method("Unsigned")
	_, err = u.Args([]any{-1})
	assert.ErrorContains(t, err, "argument 1 is int, want uint8")
	_, err = u.Args([]any{int8(-1)})
	assert.ErrorContains(t, err, "argument 1 is int8, want uint8")
	_, err = u.Args([]any{300})
	assert.Error(t, err)
	vs, err = u.Args([]any{200})
	require.NoError(t, err)
	v, err = u.Call(t.Context(), reflect.ValueOf(nilable{}), vs)
	require.NoError(t, err)
	assert.Equal(t, uint8(200), v)
}

func TestEchoContract(t *testing.T) {
	f, ok := reflect.TypeFor[service.Echo]().FieldByName("Echo")
	require.True(t, ok)
	assert.Equal(t, service.EchoMethod, f.Tag.Get("dubbo"))
	assert.True(t, strings.HasPrefix(service.EchoMethod, "$"))
}
