package dubbo

import (
	"bytes"
	"context"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
)

// methodsInvoker is a fuzzInvoker that lists its methods.
type methodsInvoker struct{ fuzzInvoker }

func (methodsInvoker) Methods() []string { return []string{"M", "Any"} }

// recorder wraps an invoker and keeps the last invocation.
type recorder struct {
	protocol.Invoker
	last *protocol.Invocation
}

func (r *recorder) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	r.last = inv
	return r.Invoker.Invoke(ctx, inv)
}

func (r *recorder) Unwrap() protocol.Invoker { return r.Invoker }

// The request head's names and the calling application come from the
// server's interner: the strings the exported service holds, not copies.
func TestRequestHeadNamesAreInterned(t *testing.T) {
	p, err := New(nil)
	require.NoError(t, err)
	s := &server{p: p, names: newInterner()}
	u := protocol.NewURL("dubbo", "127.0.0.1", 0, "intern.S", map[string]string{"version": "1.0"})
	rec := &recorder{Invoker: methodsInvoker{fuzzInvoker{u}}}
	e := &exported{inv: rec, typer: argTyperOf(rec), serID: serialize.MsgpackID, names: exportedNames(u, rec)}
	require.ElementsMatch(t, []string{"intern.S", "1.0", "", "M", "m", "Any", "any"}, e.names)
	m := map[string]*exported{"intern.S:1.0": e}
	s.storeForTest(m)

	handle := func(app string) *protocol.Invocation {
		t.Helper()
		var b bytes.Buffer
		enc := serialize.NewMsgpack().NewEncoder(&b)
		require.NoError(t, encodeRequest(enc, nil, &protocol.Invocation{Service: "intern.S", Version: "1.0", Method: "Any", Args: []any{"x"}},
			u, 100, map[string]string{protocol.KeyRemoteApplication: app, "user": "v"}))
		enc.Release()
		resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: b.Bytes()})
		require.NoError(t, err)
		resp.Release()
		return rec.last
	}
	inv := handle("shop")
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	require.True(t, same(inv.Service, e.names[0]), "service name interned")
	require.True(t, same(inv.Version, e.names[1]), "version interned")
	require.True(t, same(inv.Method, e.names[5]), "method name interned")
	require.Equal(t, "shop", inv.Attachments[protocol.KeyRemoteApplication])
	first := inv.Attachments[protocol.KeyRemoteApplication]
	inv = handle("shop")
	require.True(t, same(first, inv.Attachments[protocol.KeyRemoteApplication]), "the calling application is learnt")
	require.Equal(t, "v", inv.Attachments["user"])

	// Strangers cannot grow the interner: at most maxLearned names.
	for i := range 3 * maxLearned {
		require.Equal(t, "app"+strconv.Itoa(i), handle("app" + strconv.Itoa(i)).Attachments[protocol.KeyRemoteApplication])
	}
	require.Len(t, s.names.learned, maxLearned)
	require.Len(t, *s.names.m.Load(), maxLearned+len(s.names.static))

	// Unexporting drops the service's names, not the learnt ones.
	s.remove("intern.S:1.0")
	_, held := (*s.names.m.Load())["intern.S"]
	require.False(t, held)
	require.Len(t, s.names.learned, maxLearned)
}

// appChecker answers with the calling application's name, and counts the
// calls whose attachments are not what the argument says was sent.
type appChecker struct {
	fuzzInvoker
	wrong atomic.Int64
}

func (c *appChecker) Methods() []string { return []string{"Any"} }

func (c *appChecker) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	sent := inv.Args[0].(string) // "app" or "app|user"
	app, user, _ := strings.Cut(sent, "|")
	if inv.Attachments[protocol.KeyRemoteApplication] != app || inv.Attachments["user"] != user {
		c.wrong.Add(1)
	}
	return &protocol.Result{Value: inv.Attachments[protocol.KeyRemoteApplication]}, nil
}

// A call carrying only the calling application's name gets a map kept by
// the server's interner, shared with the calls before it; a call with a
// token or a key of its own gets a map of its own. From many goroutines
// at once (run with -race), every call sees what it sent.
func TestAttachmentMapsKept(t *testing.T) {
	p, err := New(nil)
	require.NoError(t, err)
	s := &server{p: p, names: newInterner()}
	u := protocol.NewURL("dubbo", "127.0.0.1", 0, "keep.S", nil)
	c := &appChecker{fuzzInvoker: fuzzInvoker{u}}
	e := &exported{inv: c, typer: c, serID: serialize.MsgpackID, names: exportedNames(u, c)}
	m := map[string]*exported{"keep.S": e}
	s.storeForTest(m)

	call := func(app, user, token string) (map[string]string, error) {
		var b bytes.Buffer
		enc := serialize.NewMsgpack().NewEncoder(&b)
		atts := map[string]string{protocol.KeyRemoteApplication: app}
		sent := app
		if user != "" {
			atts["user"] = user
			sent += "|" + user
		}
		if token != "" {
			atts[protocol.KeyToken] = token
		}
		err := encodeRequest(enc, nil, &protocol.Invocation{Method: "Any", Args: []any{sent}}, u, 1000, atts)
		enc.Release()
		if err != nil {
			return nil, err
		}
		d, err := serialize.NewMsgpack().NewDecoder(b.Bytes())
		if err != nil {
			return nil, err
		}
		defer d.Release()
		r, err := decodeRequestHead(d, p.opts.Attachments, s.names)
		if err != nil {
			return nil, err
		}
		resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: b.Bytes()})
		if err != nil {
			return nil, err
		}
		resp.Release()
		return r.atts, nil
	}
	ptr := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

	a1, err := call("shop", "", "")
	require.NoError(t, err)
	a2, err := call("shop", "", "")
	require.NoError(t, err)
	require.Equal(t, map[string]string{protocol.KeyRemoteApplication: "shop"}, a2)
	require.Equal(t, ptr(a1), ptr(a2), "the kept map")
	b1, err := call("bank", "", "")
	require.NoError(t, err)
	require.Equal(t, "bank", b1[protocol.KeyRemoteApplication])
	require.NotEqual(t, ptr(a1), ptr(b1))
	for _, other := range [][2]string{{"v", ""}, {"", "secret"}} {
		x1, err := call("shop", other[0], other[1])
		require.NoError(t, err)
		x2, err := call("shop", other[0], other[1])
		require.NoError(t, err)
		require.NotEqual(t, ptr(x1), ptr(x2), "not kept: %v", other)
		require.NotEqual(t, ptr(a1), ptr(x1))
	}
	require.Len(t, *s.names.kept.Load(), 2)

	// Concurrent calls of kept, learnt and other applications.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				app, user := "app"+strconv.Itoa((g*100+i)%(2*maxKept)), ""
				if i%5 == 0 {
					user = "u" + strconv.Itoa(i)
				}
				if _, err := call(app, user, ""); err != nil {
					errs <- err
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
	require.Zero(t, c.wrong.Load(), "calls that saw attachments they did not send")
	require.LessOrEqual(t, len(*s.names.kept.Load()), maxKept)
	require.Greater(t, len(*s.names.kept.Load()), 2)
}
