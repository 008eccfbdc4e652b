package dubbo

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/transport"
)

// BenchmarkCodec is the codec's share of a call with a 581-byte []byte
// argument and reply, each step alone: the consumer encoding the request
// and decoding the reply, the provider decoding the request (head and
// argument, the names interned) and encoding the response.
func BenchmarkCodec(b *testing.B) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	payload := bytes.Repeat([]byte("p"), 581)
	inv := &protocol.Invocation{Method: "Echo", Args: []any{payload}}
	atts := map[string]string{protocol.KeyRemoteApplication: "bench-consumer"}
	var req bytes.Buffer
	enc := ser.NewEncoder(&req)
	if err := encodeRequest(enc, nil, inv, u, 1000, atts); err != nil {
		b.Fatal(err)
	}
	enc.Release()
	b.Run("encode-request", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := ser.NewEncoder(&buf)
			if err := encodeRequest(enc, nil, inv, u, 1000, atts); err != nil {
				b.Fatal(err)
			}
			enc.Release()
		}
	})
	in := newInterner()
	prov, err := proxy.NewProvider(u, handleEchoBytes{})
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]*exported{"bench.Echo": {names: exportedNames(u, prov)}}
	in.set(m)
	types := []reflect.Type{bytesType}
	b.Run("decode-request", func(b *testing.B) {
		b.ReportAllocs()
		var slots argSlots
		for b.Loop() {
			dec, err := ser.NewDecoder(req.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			r, err := decodeRequestHead(dec, serialize.MapLimits{}, in)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := decodeArgs(dec, &r, types, true, &slots); err != nil {
				b.Fatal(err)
			}
			dec.Release()
		}
	})
	res := &protocol.Result{Value: payload}
	f, err := encodeResponse(ser, res, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp := bytes.Clone(f.B[transport.HeaderSize:])
	f.Release()
	b.Run("encode-response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := encodeResponse(ser, res, nil)
			if err != nil {
				b.Fatal(err)
			}
			f.Release()
		}
	})
	b.Run("decode-response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var reply []byte
			if _, err := decodeResponse(ser, resp, &protocol.Invocation{Reply: &reply}, serialize.MapLimits{}); err != nil || len(reply) != len(payload) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncodeLargeArgument is the consumer's encoding of a request
// with one 16 KiB []byte argument into a pooled frame: copied into the
// frame (an encoder without header-only writes) or spliced (msgpack's).
func BenchmarkEncodeLargeArgument(b *testing.B) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	inv := &protocol.Invocation{Method: "Echo", Args: []any{bytes.Repeat([]byte("p"), 16<<10)}}
	atts := map[string]string{protocol.KeyRemoteApplication: "bench-consumer"}
	for _, plain := range []bool{true, false} {
		name := "spliced"
		if plain {
			name = "copied"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := exchange.NewFrame()
				var enc serialize.Encoder = ser.NewEncoder(f)
				if plain {
					enc = plainEncoder{enc}
				}
				if err := encodeRequest(enc, f, inv, u, 1000, atts); err != nil {
					b.Fatal(err)
				}
				enc.Release()
				f.Release()
			}
		})
	}
}
