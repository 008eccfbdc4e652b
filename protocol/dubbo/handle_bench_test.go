package dubbo

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
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

type handleEchoBorrowed struct{}

func (handleEchoBorrowed) Echo(_ context.Context, b service.Borrowed) ([]byte, error) { return b, nil }

// BenchmarkProviderHandle16K is BenchmarkProviderHandleBytes with a 16
// KiB argument: the provider's copy of it is new memory on every call.
func BenchmarkProviderHandle16K(b *testing.B) {
	benchmarkProviderHandle(b, handleEchoBytes{}, bytes.Repeat([]byte("p"), 16<<10))
}

// BenchmarkProviderHandleBorrowed16K is BenchmarkProviderHandle16K with
// the method borrowing its argument (service.Borrowed): no copy.
func BenchmarkProviderHandleBorrowed16K(b *testing.B) {
	benchmarkProviderHandle(b, handleEchoBorrowed{}, bytes.Repeat([]byte("p"), 16<<10))
}

// TestProviderHandleBorrowedAllocs: a method that borrows its 16 KiB
// argument (service.Borrowed) costs the provider fewer allocations per
// call than one that takes a []byte (one less: the copy), and less than
// 1 KiB per call in all, its reply (the argument) included, where the
// copy alone is 16 KiB. The counts are means over many calls: under
// -race sync.Pool drops objects at random, which moves a count by one or
// so now and then, so that two whole counts (testing.AllocsPerRun) came
// out equal in 8 of 300 runs at load ~12.
func TestProviderHandleBorrowedAllocs(t *testing.T) {
	arg := bytes.Repeat([]byte("p"), 16<<10)
	owned := newHandleLoop(t, handleEchoBytes{}, arg, nil)
	borrowed := newHandleLoop(t, handleEchoBorrowed{}, arg, nil)
	perCall := func(f func()) (allocs, bytes float64) {
		const runs = 1000
		f()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs
	}
	oa, ob := perCall(owned)
	ba, bb := perCall(borrowed)
	t.Logf("per call: []byte %.1f allocations, %.0f bytes; Borrowed %.1f allocations, %.0f bytes", oa, ob, ba, bb)
	require.GreaterOrEqual(t, ob, float64(16<<10), "a []byte argument is a copy")
	require.Less(t, bb, float64(1<<10), "a Borrowed argument is no copy")
	require.GreaterOrEqual(t, oa-ba, 0.5, "a Borrowed argument saves the copy's allocation")
}

func benchmarkProviderHandle(b *testing.B, impl, arg any) {
	handle := newHandleLoop(b, impl, arg, nil)
	b.ReportAllocs()
	for b.Loop() {
		handle()
	}
}

// BenchmarkProviderHandleVersioned is BenchmarkProviderHandle for a
// service exported with a version and a group.
func BenchmarkProviderHandleVersioned(b *testing.B) {
	handle := newHandleLoop(b, handleEcho{}, strings.Repeat("p", 581), map[string]string{"version": "1.0", "group": "g"})
	b.ReportAllocs()
	for b.Loop() {
		handle()
	}
}

// A versioned service costs no more allocations per call than one without
// a version or group: its key string is not built to find it.
func TestProviderHandleVersionedAllocs(t *testing.T) {
	arg := strings.Repeat("p", 581)
	plain := newHandleLoop(t, handleEcho{}, arg, nil)
	versioned := newHandleLoop(t, handleEcho{}, arg, map[string]string{"version": "1.0", "group": "g"})
	// Under -race sync.Pool drops objects at random, so the counts move
	// by one or so; building the key cost 2.
	want := testing.AllocsPerRun(1000, plain)
	require.LessOrEqual(t, testing.AllocsPerRun(1000, versioned), want+1)
}

// newHandleLoop exports impl (with the URL parameters params) on a server
// that is not listening, with the monitor's provider filter, and returns a
// function that makes it handle one call of Echo(arg).
func newHandleLoop(tb testing.TB, impl, arg any, params map[string]string) func() {
	p, err := New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", params)
	prov, err := proxy.NewProvider(u, impl)
	if err != nil {
		tb.Fatal(err)
	}
	rec := monitor.New().ProviderRecorder()
	rec.SetAddr("127.0.0.1:20880")
	counting := filter.NewCount(rec)
	inv := protocol.Chain(prov, counting)
	s := &server{p: p, names: newInterner()}
	e := &exported{inv: inv, typer: argTyperOf(inv), observer: protocol.ResponseObserverOf(inv), serID: serialize.MsgpackID,
		names: exportedNames(u, inv), id: serviceID{u.Interface(), u.Version(), u.Group()}}
	s.store(map[string]*exported{u.ServiceKey(): e})
	var body bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&body)
	if err := encodeRequest(enc, nil, &protocol.Invocation{Method: "Echo", Args: []any{arg}}, u, 1000,
		map[string]string{protocol.KeyRemoteApplication: "bench-consumer"}); err != nil {
		tb.Fatal(err)
	}
	enc.Release()
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	ctx := context.Background()
	return func() {
		resp, err := s.Handle(ctx, &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: body.Bytes(), RemoteAddr: remote})
		if err != nil {
			tb.Fatal(err)
		}
		resp.Release()
	}
}
