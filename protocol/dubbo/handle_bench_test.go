package dubbo

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
)

type handleEcho struct{}

func (handleEcho) Echo(_ context.Context, s string) (string, error) { return s, nil }

type handleEchoBytes struct{}

func (handleEchoBytes) Echo(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// BenchmarkProviderHandle is the provider's whole work for one call but
// the network: decode the request (service, method, the calling
// application's attachment, a 581-byte string), the monitor's provider
// filter, the proxy provider invoker and the method, and the encoded
// response. Its allocs/op are the provider's allocations per call (the
// exchange layer's Request included).
func BenchmarkProviderHandle(b *testing.B) {
	benchmarkProviderHandle(b, handleEcho{}, strings.Repeat("p", 581))
}

// BenchmarkProviderHandleBytes is BenchmarkProviderHandle with the
// method of the bench/ module's provider: Echo([]byte) ([]byte, error).
func BenchmarkProviderHandleBytes(b *testing.B) {
	benchmarkProviderHandle(b, handleEchoBytes{}, bytes.Repeat([]byte("p"), 581))
}

func benchmarkProviderHandle(b *testing.B, impl, arg any) {
	p, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	prov, err := proxy.NewProvider(u, impl)
	if err != nil {
		b.Fatal(err)
	}
	rec := monitor.New().ProviderRecorder()
	rec.SetAddr("127.0.0.1:20880")
	counting := filter.NewCount(rec)
	inv := protocol.Chain(prov, counting)
	s := &server{p: p, names: newInterner()}
	e := &exported{inv: inv, typer: argTyperOf(inv), observer: protocol.ResponseObserverOf(inv), serID: serialize.MsgpackID,
		names: exportedNames(u, inv)}
	m := map[string]*exported{"bench.Echo": e}
	s.services.Store(&m)
	s.names.set(m)
	var body bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&body)
	if err := encodeRequest(enc, nil, &protocol.Invocation{Method: "Echo", Args: []any{arg}}, u, 1000,
		map[string]string{protocol.KeyRemoteApplication: "bench-consumer"}); err != nil {
		b.Fatal(err)
	}
	enc.Release()
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.Handle(ctx, &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: body.Bytes(), RemoteAddr: remote})
		if err != nil {
			b.Fatal(err)
		}
		resp.Release()
	}
}
