package dubbo

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
)

// retainer keeps the arguments of its calls, as a service may.
type retainer struct {
	mu   sync.Mutex
	strs []any
	bufs [][]byte
}

func (r *retainer) Str(_ context.Context, s string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.strs = append(r.strs, s)
	return s, nil
}

func (r *retainer) Bytes(_ context.Context, b []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bufs = append(r.bufs, b)
	return b, nil
}

// keepArgs is a provider filter that keeps the invocations' argument
// lists, as a filter may.
type keepArgs struct {
	mu   sync.Mutex
	args []any
}

func (k *keepArgs) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	k.mu.Lock()
	k.args = append(k.args, inv.Args...)
	k.mu.Unlock()
	return next.Invoke(ctx, inv)
}

// The string and []byte arguments live in the call's own allocation, which
// the interface values of Invocation.Args point into: what the method and
// the filters keep must stay as it was after the call, after the request
// body is overwritten (it is reused), and through garbage collections,
// with calls from several goroutines at once (run with -race).
func TestArgumentsOutliveTheCall(t *testing.T) {
	p, err := New(nil)
	require.NoError(t, err)
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "keep.Args", nil)
	svc := &retainer{}
	prov, err := proxy.NewProvider(u, svc)
	require.NoError(t, err)
	filter := &keepArgs{}
	inv := protocol.Chain(prov, filter)
	s := &server{p: p, names: newInterner()}
	e := &exported{inv: inv, typer: argTyperOf(inv), serID: serialize.MsgpackID, names: exportedNames(u, inv)}
	m := map[string]*exported{"keep.Args": e}
	s.storeForTest(m)

	call := func(method string, arg any) error {
		var body bytes.Buffer
		enc := serialize.NewMsgpack().NewEncoder(&body)
		err := encodeRequest(enc, nil, &protocol.Invocation{Method: method, Args: []any{arg}}, u, 1000, nil)
		enc.Release()
		if err != nil {
			return err
		}
		b := body.Bytes()
		resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: b})
		if err != nil {
			return err
		}
		resp.Release()
		for i := range b {
			b[i] = 'X' // the body is reused once Handle returns
		}
		return nil
	}
	arg := func(g, i int) string { return fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("a", i%40)) }
	const goroutines, calls = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if err := call("Str", arg(g, i)); err != nil {
					errs <- err
					return
				}
				if err := call("Bytes", []byte(arg(g, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
		_ = make([]byte, 1<<20)
	}
	want := map[string]int{}
	for g := range goroutines {
		for i := range calls {
			want[arg(g, i)] += 2
		}
	}
	got := map[string]int{}
	for _, s := range svc.strs {
		got[s.(string)]++
	}
	for _, b := range svc.bufs {
		got[string(b)]++
	}
	require.Equal(t, want, got, "what the method kept")
	got = map[string]int{}
	for _, a := range filter.args {
		switch v := a.(type) {
		case string:
			got[v]++
			require.True(t, a == any(v), "interface equality")
		case []byte:
			got[string(v)]++
		default:
			t.Fatalf("argument of type %T", a)
		}
	}
	require.Equal(t, want, got, "what the filter kept")
}
