package service_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/service"
)

type item struct{ N int }

type name string

// shapes has a method of every shape CallDirect handles (no argument, a
// string, a []byte, a pointer or a map; error only, or a string, []byte,
// pointer or map reply) and some it does not. Each uses the receiver's
// fields, fails for the argument "fail" and panics for "panic".
type shapes struct {
	pad    [3]int64 // so that a value receiver is copied in more than one word
	prefix string
}

func check(s string) error {
	switch s {
	case "fail":
		return errors.New("failed: " + s)
	case "panic":
		panic("asked to panic")
	}
	return nil
}

func (s shapes) Ping(context.Context) error             { return check(s.prefix) }
func (s shapes) Name(context.Context) (string, error)   { return s.prefix + "name", nil }
func (s shapes) Raw(context.Context) ([]byte, error)    { return []byte(s.prefix), nil }
func (s shapes) First(context.Context) (*item, error)   { return &item{N: int(s.pad[2])}, nil }
func (s shapes) Note(_ context.Context, a string) error { return check(a) }
func (s shapes) Hello(_ context.Context, a string) (string, error) {
	return s.prefix + a, check(a)
}
func (s shapes) ToBytes(_ context.Context, a string) ([]byte, error) {
	return []byte(s.prefix + a), check(a)
}
func (s shapes) Lookup(_ context.Context, a string) (*item, error) {
	if a == "none" {
		return nil, nil
	}
	return &item{N: len(a) + int(s.pad[2])}, check(a)
}
func (s shapes) Store(_ context.Context, b []byte) error { return check(string(b)) }
func (s shapes) FromBytes(_ context.Context, b []byte) (string, error) {
	return s.prefix + string(b), check(string(b))
}
func (s shapes) Echo(_ context.Context, b []byte) ([]byte, error) { return b, check(string(b)) }
func (s shapes) Count(_ context.Context, b []byte) (map[string]int, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return map[string]int{s.prefix: len(b)}, check(string(b))
}
func (s shapes) Lend(_ context.Context, b service.Borrowed) ([]byte, error) {
	return b[:len(b):len(b)], check(string(b))
}
func (s shapes) Peek(_ context.Context, b service.Borrowed) error { return check(string(b)) }
func (s shapes) Put(_ context.Context, it *item) error {
	if it != nil && it.N < 0 {
		panic("negative")
	}
	return nil
}
func (s shapes) Label(_ context.Context, it *item) (string, error) {
	return fmt.Sprintf("%s%d", s.prefix, it.N), nil
}
func (s shapes) Keys(_ context.Context, m map[string]int) ([]byte, error) {
	return []byte(fmt.Sprint(len(m), s.prefix)), nil
}
func (s shapes) Next(_ context.Context, it *item) (*item, error) {
	if it.N == 0 {
		return nil, &shapeErr{}
	}
	return &item{N: it.N + 1}, nil
}
func (s shapes) Merge(_ context.Context, m map[string]int) (map[string]int, error) {
	out := map[string]int{s.prefix: 1}
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// Numbers and bools.
func (s shapes) Number(_ context.Context, n int64) (int64, error) { return n + 1, nil }
func (s shapes) Widen(_ context.Context, n int32) (int64, error) {
	if n < 0 {
		return 0, errors.New("negative")
	}
	return int64(n) * 1 << 40, nil
}
func (s shapes) Narrow(_ context.Context, n int) (int32, error)     { return int32(n) - 1, nil }
func (s shapes) Not(_ context.Context, b bool) (bool, error)        { return !b, nil }
func (s shapes) Half(_ context.Context, f float64) (float64, error) { return f / 2, nil }
func (s shapes) Len(_ context.Context, a string) (int, error)       { return len(a) + int(s.pad[0]), nil }
func (s shapes) Mark(_ context.Context, f float64) (*item, error)   { return &item{N: int(f)}, nil }
func (s shapes) Seven(context.Context) (int64, error)               { return 7 + s.pad[1], nil }
func (s shapes) Check(_ context.Context, n int32) error {
	if n == 13 {
		panic("thirteen")
	}
	return nil
}

// Shapes without a direct form: two arguments, a named string, a uint.
func (s shapes) Two(_ context.Context, a, b string) (string, error)   { return a + b, nil }
func (s shapes) Named(_ context.Context, n name) (name, error)        { return n + name(s.prefix), nil }
func (s shapes) Unsigned(_ context.Context, n uint16) (uint16, error) { return n + 1, nil }
func (s shapes) Ctx(ctx context.Context, a string) (string, error) {
	return ctx.Value(ctxKey{}).(string) + a, nil
}
func (s *shapes) Pointer(_ context.Context, a string) (string, error) { return s.prefix + a, nil }

type ctxKey struct{}

type shapeErr struct{}

func (*shapeErr) Error() string { return "typed" }

// outcome is what a call gave: its reply, its error, or its panic.
type outcome struct {
	reply  any
	err    error
	panics any
}

func callReflect(m *service.Method, rcvr reflect.Value, args []any) (o outcome) {
	defer func() { o.panics = recover() }()
	a, err := m.Args(args)
	if err != nil {
		return outcome{err: err}
	}
	o.reply, o.err = m.Call(context.WithValue(context.Background(), ctxKey{}, "ctx:"), rcvr, a)
	return o
}

func callDirect(m *service.Method, rcvr reflect.Value, args []any, into *service.Reply) (o outcome, called bool) {
	defer func() {
		if r := recover(); r != nil {
			o.panics, called = r, true
		}
	}()
	o.reply, called, o.err = m.CallDirect(context.WithValue(context.Background(), ctxKey{}, "ctx:"), rcvr, args, into)
	return o, called
}

// TestCallDirectMatchesCall calls every method of shapes with arguments
// of the right types, of other types and none, through CallDirect and
// through Args and Call, on a pointer receiver and on an addressable value
// receiver, and wants the same reply, error and panic from both, and
// CallDirect to have made the call exactly when its shape and the
// arguments' types allow it.
func TestCallDirectMatchesCall(t *testing.T) {
	direct := map[string]bool{"Ping": true, "Name": true, "Raw": true, "First": true, "Note": true, "Hello": true,
		"ToBytes": true, "Lookup": true, "Store": true, "FromBytes": true, "Echo": true, "Count": true, "Put": true,
		"Label": true, "Keys": true, "Next": true, "Merge": true, "Ctx": true, "Pointer": true,
		"Number": true, "Widen": true, "Narrow": true, "Not": true, "Half": true, "Len": true, "Mark": true,
		"Seven": true, "Check": true, "Lend": true, "Peek": true}
	argSets := [][]any{
		nil,
		{"world"}, {"fail"}, {"panic"}, {"none"}, {""},
		{[]byte("bytes")}, {[]byte("fail")}, {[]byte("panic")}, {[]byte{}}, {[]byte(nil)},
		{service.Borrowed("lent")}, {service.Borrowed("fail")}, {service.Borrowed("panic")}, {service.Borrowed(nil)},
		{&item{N: 4}}, {&item{N: 0}}, {&item{N: -1}}, {(*item)(nil)},
		{map[string]int{"a": 1}}, {map[string]int(nil)},
		{nil}, {42}, {int64(42)}, {name("named")}, {"a", "b"}, {struct{}{}},
		{int32(-5)}, {int32(13)}, {int32(1 << 30)}, {-7}, {true}, {false}, {2.5}, {float32(1)}, {uint16(3)}, {int64(-1)},
	}
	val := shapes{pad: [3]int64{1, 2, 3}, prefix: "p-"}
	addressable := reflect.New(reflect.TypeFor[shapes]()).Elem()
	addressable.Set(reflect.ValueOf(val))
	for _, rc := range []struct {
		name string
		rcvr reflect.Value
	}{
		{"pointer", reflect.ValueOf(&shapes{pad: [3]int64{1, 2, 3}, prefix: "p-"})},
		{"value", addressable},
	} {
		tbl, err := service.TableOf(rc.rcvr.Type())
		require.NoError(t, err)
		for _, mname := range tbl.Names() {
			m, _ := tbl.Method(mname)
			for _, args := range argSets {
				t.Run(fmt.Sprintf("%s/%s/%v", rc.name, mname, args), func(t *testing.T) {
					want := callReflect(m, rc.rcvr, args)
					exact := len(args) == len(m.ArgTypes)
					for i, a := range args {
						exact = exact && reflect.TypeOf(a) == m.ArgTypes[i]
					}
					for _, into := range []*service.Reply{nil, new(service.Reply)} {
						got, called := callDirect(m, rc.rcvr, args, into)
						assert.Equal(t, direct[mname] && exact, called, "called")
						if !called {
							assert.Equal(t, outcome{}, got)
							continue
						}
						assert.Equal(t, want.panics, got.panics, "panic")
						assert.Equal(t, want.err, got.err, "error")
						assert.Equal(t, want.reply, got.reply, "reply")
						if want.reply != nil {
							assert.Equal(t, reflect.TypeOf(want.reply), reflect.TypeOf(got.reply))
						}
						if s, ok := want.reply.(string); ok {
							assert.True(t, got.reply == any(s), "interface equality")
						}
					}
				})
			}
		}
	}
}

func TestCallDirectReceivers(t *testing.T) {
	tbl, err := service.TableFor(shapes{})
	require.NoError(t, err)
	m, _ := tbl.Method("Hello")
	// A value receiver that is not addressable, or of another type, or
	// none: not called.
	_, called, _ := m.CallDirect(t.Context(), reflect.ValueOf(shapes{prefix: "x"}), []any{"a"}, nil)
	assert.False(t, called)
	_, called, _ = m.CallDirect(t.Context(), reflect.ValueOf(&shapes{prefix: "x"}), []any{"a"}, nil)
	assert.False(t, called, "*shapes is not the table's type")
	_, called, _ = m.CallDirect(t.Context(), reflect.Value{}, []any{"a"}, nil)
	assert.False(t, called)

	// The receiver's fields reach the method; a pointer receiver sees
	// changes to the value it points to.
	p := &shapes{prefix: "one-"}
	ptbl, err := service.TableFor(p)
	require.NoError(t, err)
	pm, _ := ptbl.Method("Pointer")
	v, called, err := pm.CallDirect(t.Context(), reflect.ValueOf(p), []any{"a"}, nil)
	require.NoError(t, err)
	require.True(t, called)
	assert.Equal(t, "one-a", v)
	p.prefix = "two-"
	v, _, _ = pm.CallDirect(t.Context(), reflect.ValueOf(p), []any{"a"}, nil)
	assert.Equal(t, "two-a", v)
}

// TestCallDirectAllocs: a direct call allocates nothing of its own; a
// string or []byte reply is boxed once, or kept in a Reply, a pointer or
// map reply not boxed at all.
func TestCallDirectAllocs(t *testing.T) {
	p := &shapes{prefix: "p"}
	tbl, err := service.TableFor(p)
	require.NoError(t, err)
	rcvr := reflect.ValueOf(p)
	ctx := t.Context()
	var into service.Reply
	for _, tc := range []struct {
		method string
		args   []any
		into   *service.Reply
		allocs float64
	}{
		{"Echo", []any{[]byte("x")}, nil, 1},
		{"Echo", []any{[]byte("x")}, &into, 0},
		{"Lend", []any{service.Borrowed("x")}, &into, 0},
		{"Peek", []any{service.Borrowed("x")}, nil, 0},
		{"FromBytes", []any{[]byte("x")}, &into, 1}, // the method's own string
		{"Note", []any{"x"}, nil, 0},
		{"Next", []any{&item{N: 1}}, nil, 1}, // the method's own &item
		{"Put", []any{&item{N: 1}}, nil, 0},
		{"Ping", nil, nil, 0},
	} {
		m, _ := tbl.Method(tc.method)
		got := testing.AllocsPerRun(100, func() {
			if _, called, err := m.CallDirect(ctx, rcvr, tc.args, tc.into); !called || err != nil {
				t.Fatal(tc.method, called, err)
			}
		})
		assert.Equal(t, tc.allocs, got, tc.method)
	}
}

// TestCallDirectConcurrent calls one receiver from many goroutines (run
// with -race).
func TestCallDirectConcurrent(t *testing.T) {
	rcvr := reflect.New(reflect.TypeFor[shapes]()).Elem()
	rcvr.Set(reflect.ValueOf(shapes{prefix: "c-"}))
	tbl, err := service.TableOf(rcvr.Type())
	require.NoError(t, err)
	m, _ := tbl.Method("Hello")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				arg := fmt.Sprint(g, "-", i)
				v, called, err := m.CallDirect(context.Background(), rcvr, []any{arg}, nil)
				if !called || err != nil || v != "c-"+arg {
					errs <- fmt.Errorf("call %s: %v %v %v", arg, v, called, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// generic is a generic service type: its methods are instantiated wrappers.
type generic[T any] struct{ prefix T }

func (g *generic[T]) Hello(_ context.Context, a string) (string, error) {
	return fmt.Sprint(g.prefix) + a, nil
}

// greeterFace is embedded as an interface: its methods are promoted.
type greeterFace interface {
	Hello(context.Context, string) (string, error)
}

type embedding struct{ greeterFace }

// Methods of generic types and methods promoted from an embedded interface
// are called directly, with the same results as through reflection.
func TestCallDirectGenericAndPromoted(t *testing.T) {
	for _, impl := range []any{&generic[int]{prefix: 7}, &generic[string]{prefix: "s-"}, &embedding{&generic[int]{prefix: 3}},
		embedding{shapes{prefix: "e-"}}} {
		rcvr := reflect.ValueOf(impl)
		if rcvr.Kind() != reflect.Pointer {
			c := reflect.New(rcvr.Type()).Elem()
			c.Set(rcvr)
			rcvr = c
		}
		tbl, err := service.TableOf(rcvr.Type())
		require.NoError(t, err)
		m, ok := tbl.Method("Hello")
		require.True(t, ok)
		want := callReflect(m, rcvr, []any{"x"})
		got, called := callDirect(m, rcvr, []any{"x"}, new(service.Reply))
		require.True(t, called, "%T", impl)
		require.Equal(t, want, got, "%T", impl)
	}
}

// BenchmarkMethodCall compares the reflective call (Args and Call) with
// CallDirect for a string, a []byte, a pointer and a number shape.
func BenchmarkMethodCall(b *testing.B) {
	p := &shapes{prefix: "p"}
	tbl, err := service.TableFor(p)
	if err != nil {
		b.Fatal(err)
	}
	rcvr := reflect.ValueOf(p)
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		args   []any
	}{
		{"Echo", []any{[]byte("payload")}},
		{"Ctx", []any{"x"}},
		{"Next", []any{&item{N: 1}}},
		{"Widen", []any{int32(3)}},
	} {
		m, _ := tbl.Method(tc.method)
		if tc.method == "Ctx" {
			ctx = context.WithValue(ctx, ctxKey{}, "c")
		}
		b.Run(tc.method+"/reflect", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a, err := m.Args(tc.args)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.Call(ctx, rcvr, a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.method+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			var into service.Reply
			for b.Loop() {
				if _, called, err := m.CallDirect(ctx, rcvr, tc.args, &into); !called || err != nil {
					b.Fatal(called, err)
				}
			}
		})
	}
}
