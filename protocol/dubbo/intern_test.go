package dubbo

import (
	"bytes"
	"context"
	"strconv"
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
	s.services.Store(&m)
	s.names.set(m)

	handle := func(app string) *protocol.Invocation {
		t.Helper()
		var b bytes.Buffer
		enc := serialize.NewMsgpack().NewEncoder(&b)
		require.NoError(t, encodeRequest(enc, &protocol.Invocation{Service: "intern.S", Version: "1.0", Method: "Any", Args: []any{"x"}},
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
