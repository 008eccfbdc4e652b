package dubbo

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
)

type fuzzArg struct {
	Name string
	Tags []string
	N    map[string]int
}

// fuzzInvoker declares typed methods and answers with its arguments.
type fuzzInvoker struct{ u *protocol.URL }

func (f fuzzInvoker) URL() *protocol.URL { return f.u }
func (f fuzzInvoker) ArgTypes(m string) ([]reflect.Type, bool) {
	switch m {
	case "M":
		return []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[fuzzArg](), reflect.TypeFor[[]int64]()}, true
	case "Any":
		return []reflect.Type{reflect.TypeFor[any]()}, true
	}
	return nil, false
}
func (f fuzzInvoker) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	return &protocol.Result{Value: inv.Args}, nil
}

func fuzzServer(tb testing.TB) *server {
	p, err := New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := &server{p: p, names: newInterner()}
	u := protocol.NewURL("dubbo", "127.0.0.1", 0, "fuzz.S", nil)
	m := map[string]*exported{"fuzz.S": {inv: fuzzInvoker{u}, typer: fuzzInvoker{u}, serID: serialize.MsgpackID,
		names: []string{"fuzz.S", "M", "Any"}}}
	s.storeForTest(m)
	return s
}

func fuzzRequest(tb testing.TB, method string, args ...any) []byte {
	var b bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&b)
	defer enc.Release()
	u := protocol.NewURL("dubbo", "127.0.0.1", 0, "fuzz.S", nil)
	if err := encodeRequest(enc, nil, &protocol.Invocation{Method: method, Args: args}, u, 100, map[string]string{"k": "v"}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// fuzzHead encodes a request head up to its timeout: service, version,
// group, method, timeout.
func fuzzHead(tb testing.TB, method string) []byte {
	var b bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&b)
	defer enc.Release()
	for _, s := range []string{"fuzz.S", "", "", method} {
		if err := enc.EncodeString(s); err != nil {
			tb.Fatal(err)
		}
	}
	if err := enc.EncodeInt(100); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// FuzzRequestBody feeds arbitrary request bodies to the provider's decoder:
// it must answer (a response or an error), never crash or hang.
func FuzzRequestBody(f *testing.F) {
	f.Add(fuzzRequest(f, "M", "s", fuzzArg{Name: "n", Tags: []string{"t"}, N: map[string]int{"a": 1}}, []int64{1, 2}))
	f.Add(fuzzRequest(f, "Any", []any{1, "x", map[string]any{"k": 1.5}}))
	f.Add(fuzzRequest(f, service.EchoMethod, "ping"))
	f.Add(fuzzRequest(f, "Nope"))
	f.Add([]byte{0xdd, 0x01, 0x00, 0x00, 0x00})
	// The attacks: attachments declaring 64 Ki entries (a map sized from
	// the count), and 4 KiB of one-byte elements into a typed slice.
	head := fuzzHead(f, "M")
	bomb := append(append([]byte(nil), head...), 0xde, 0xff, 0xff)
	f.Add(append(bomb, bytes.Repeat([]byte{0xa0, 0xa0}, 1024)...))
	slice := append(append([]byte(nil), head...), 0x80, 0x03, 0xa1, 's', 0xdc, 0x10, 0x00)
	f.Add(append(slice, bytes.Repeat([]byte{0x80}, 4096)...))
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: body})
		if err == nil {
			resp.Release()
		}
	})
}

// FuzzResponseBody feeds arbitrary response bodies to the consumer's
// decoder, into a typed reply and into a plain value.
func FuzzResponseBody(f *testing.F) {
	ser := serialize.NewMsgpack()
	s := fuzzServer(f)
	for _, body := range [][]byte{fuzzRequest(f, "M", "s", fuzzArg{Name: "n"}, []int64{1}), fuzzRequest(f, "Any", 1)} {
		resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: body})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), exchange.Body(resp)...))
		resp.Release()
	}
	f.Add([]byte{0x00, 0x82, 0xa4, 'c', 'o', 'd', 'e', 0x05, 0xa7, 'm', 'e', 's', 's', 'a', 'g', 'e', 0xa1, 'x', 0x80})
	lim := s.p.opts.Attachments
	f.Fuzz(func(t *testing.T, body []byte) {
		var reply []any
		_, _ = decodeResponse(ser, body, &protocol.Invocation{Reply: &reply}, lim)
		var typed fuzzArg
		_, _ = decodeResponse(ser, body, &protocol.Invocation{Reply: &typed}, lim)
		_, _ = decodeResponse(ser, body, &protocol.Invocation{}, lim)
	})
}
