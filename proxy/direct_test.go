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

type (
	name   string
	blob   []byte
	count  uint32
	big    uint64
	points []user
)

// shapes has a field of every shape the plain-func stubs handle, and some
// they leave to reflect.MakeFunc.
type shapes struct {
	Str     func(context.Context, string) (string, error)
	Bytes   func(context.Context, []byte) ([]byte, error)
	Named   func(context.Context, name) (blob, error)
	Ptr     func(context.Context, *user) (*user, error)
	Map     func(context.Context, map[string]int) (map[string]int, error)
	Int     func(context.Context, int) (int, error)
	Int32   func(context.Context, int32) (count, error)
	Uint64  func(context.Context, big) (int64, error)
	Bool    func(context.Context, bool) (bool, error)
	Float   func(context.Context, float64) (float64, error)
	Slice   func(context.Context, points) (points, error)
	NoArgs  func(context.Context) (string, error)
	ErrOnly func(context.Context, string) error
	Ping    func(context.Context) error
	Struct  func(context.Context, user) (user, error)          // reflective
	Two     func(context.Context, string, int) (string, error) // reflective
	Float32 func(context.Context, float32) (float32, error)    // reflective
}

// seen is what an invoker was given for one call, printed.
type seen struct {
	method, args, reply string
	atts                map[string]string
}

// mirror answers every call by storing into its Reply pointer the value
// of answers[method] (its Result.Value the Reply pointer), or returns
// errs[method], and records what it was given.
type mirror struct {
	answers map[string]any
	errs    map[string]error
	// asValue: answer with Result.Value the value itself, not the Reply
	// pointer (as an in-process invoker does).
	asValue bool

	mu   sync.Mutex
	seen []seen
}

func (m *mirror) invoker() protocol.Invoker {
	return protocol.InvokerFunc{U: testURL(), F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		s := seen{method: inv.Method, atts: inv.Attachments}
		for _, a := range inv.Args {
			s.args += fmt.Sprintf("%T %#v;", a, a)
		}
		s.reply = fmt.Sprintf("%T", inv.Reply)
		m.mu.Lock()
		m.seen = append(m.seen, s)
		m.mu.Unlock()
		if err := m.errs[inv.Method]; err != nil {
			if inv.Reply != nil {
				reflect.ValueOf(inv.Reply).Elem().Set(reflect.ValueOf(m.answers[inv.Method]))
			}
			return nil, err
		}
		v, ok := m.answers[inv.Method]
		if !ok {
			return nil, nil
		}
		if m.asValue {
			return &protocol.Result{Value: v}, nil
		}
		if inv.Reply != nil {
			reflect.ValueOf(inv.Reply).Elem().Set(reflect.ValueOf(v))
		}
		return &protocol.Result{Value: inv.Reply}, nil
	}}
}

// callAll calls every field of c and prints the results.
func callAll(ctx context.Context, c *shapes) []string {
	var out []string
	p := func(v any, err error) { out = append(out, fmt.Sprintf("%T %#v %v", v, v, err)) }
	p(c.Str(ctx, "s"))
	p(c.Bytes(ctx, []byte{1, 2}))
	p(c.Named(ctx, "n"))
	p(c.Ptr(ctx, &user{"ann", 3}))
	p(c.Ptr(ctx, nil))
	p(c.Map(ctx, map[string]int{"a": 1}))
	p(c.Int(ctx, -7))
	p(c.Int32(ctx, -1))
	p(c.Uint64(ctx, 1<<63+5))
	p(c.Bool(ctx, true))
	p(c.Float(ctx, 2.5))
	p(c.Slice(ctx, points{{"a", 1}}))
	p(c.NoArgs(ctx))
	p(nil, c.ErrOnly(ctx, "e"))
	p(nil, c.Ping(ctx))
	p(c.Struct(ctx, user{"bob", 4}))
	p(c.Two(ctx, "x", 2))
	p(c.Float32(ctx, 1.5))
	return out
}

var shapeAnswers = map[string]any{
	"Str": "S", "Bytes": []byte{3}, "Named": blob("B"), "Ptr": &user{"P", 1},
	"Map": map[string]int{"m": 2}, "Int": -9, "Int32": count(1 << 31), "Uint64": int64(-3),
	"Bool": true, "Float": -0.5, "Slice": points{{"z", 26}}, "NoArgs": "none",
	"Struct": user{"s", 5}, "Two": "two", "Float32": float32(0.25),
}

// TestPlainStubsMatchReflective calls every shape through the plain-func
// stubs and through reflect.MakeFunc's, with replies stored through the
// Reply pointer, given as values, absent, wrong, and with errors, and
// checks that the invoker sees the same invocations and the caller the
// same results.
func TestPlainStubsMatchReflective(t *testing.T) {
	ctx := service.WithAttachment(testCtx(t), "k", "v")
	boom := errors.New("boom")
	allErrs := map[string]error{}
	wrong := map[string]any{}
	for m := range shapeAnswers {
		allErrs[m] = fmt.Errorf("%s: %w", m, boom)
		wrong[m] = struct{ X int }{1}
	}
	allErrs["ErrOnly"], allErrs["Ping"] = boom, &service.Error{Code: 7, Message: "no", Remote: true}
	for _, tc := range []struct {
		name string
		m    func() *mirror
	}{
		{"reply pointer", func() *mirror { return &mirror{answers: shapeAnswers} }},
		{"reply as value", func() *mirror { return &mirror{answers: shapeAnswers, asValue: true} }},
		{"no result", func() *mirror { return &mirror{} }},
		{"wrong value", func() *mirror { return &mirror{answers: wrong, asValue: true} }},
		{"errors", func() *mirror { return &mirror{answers: shapeAnswers, errs: allErrs} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(reflective bool) ([]string, []seen) {
				proxy.SetReflectiveStubs(reflective)
				defer proxy.SetReflectiveStubs(false)
				m := tc.m()
				var c shapes
				require.NoError(t, proxy.Refer(&c, m.invoker()))
				return callAll(ctx, &c), m.seen
			}
			plainOut, plainSeen := run(false)
			reflOut, reflSeen := run(true)
			assert.Equal(t, reflOut, plainOut)
			assert.Equal(t, reflSeen, plainSeen)
			require.Len(t, plainSeen, 18)
			assert.Equal(t, map[string]string{"k": "v"}, plainSeen[0].atts)
		})
	}
	// Spot checks of what both give, so that equal is also right.
	m := &mirror{answers: shapeAnswers}
	var c shapes
	require.NoError(t, proxy.Refer(&c, m.invoker()))
	out := callAll(ctx, &c)
	assert.Equal(t, `string "S" <nil>`, out[0])
	assert.Equal(t, `proxy_test.count 0x80000000 <nil>`, out[7])
	assert.Equal(t, `proxy_test.big 0x8000000000000005;`, m.seen[8].args)
	assert.Equal(t, `*proxy_test.user (*proxy_test.user)(nil);`, m.seen[4].args)
	assert.Equal(t, `*proxy_test.blob`, m.seen[2].reply)
	assert.Equal(t, `<nil>`, m.seen[13].reply)
	assert.Empty(t, m.seen[12].args)

	m = &mirror{answers: wrong, asValue: true}
	require.NoError(t, proxy.Refer(&c, m.invoker()))
	_, err := c.Ptr(ctx, nil)
	assert.ErrorIs(t, err, status.ErrBadResponse)
	assert.ErrorContains(t, err, "demo.Greeter.Ptr returned struct { X int }, want *proxy_test.user")
}

// TestPlainStubsConcurrent: each call has a frame of its own.
func TestPlainStubsConcurrent(t *testing.T) {
	ctx := testCtx(t)
	inv := protocol.InvokerFunc{U: testURL(), F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		*inv.Reply.(*[]byte) = append([]byte("re:"), inv.Args[0].([]byte)...)
		return &protocol.Result{Value: inv.Reply}, nil
	}}
	var c shapes
	require.NoError(t, proxy.Refer(&c, inv))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				arg := fmt.Appendf(nil, "%d-%d", g, i)
				got, err := c.Bytes(ctx, arg)
				if err == nil && string(got) != "re:"+string(arg) {
					err = fmt.Errorf("got %q for %q", got, arg)
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
}
