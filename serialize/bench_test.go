package serialize_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/minidubbo/minidubbo/serialize"
)

// BenchmarkMsgpackBytes encodes and decodes a []byte value of 581 bytes
// and 16 KiB, the payloads of the bench/ rows, as a call's argument and
// reply go: encoded into a reused buffer, decoded into a new *[]byte (the
// consumer's reply) or with DecodeBytes (the provider's argument).
func BenchmarkMsgpackBytes(b *testing.B) {
	ser := serialize.NewMsgpack()
	for _, size := range []int{581, 16 << 10} {
		payload := bytes.Repeat([]byte{'p'}, size)
		var buf bytes.Buffer
		enc := ser.NewEncoder(&buf)
		if err := enc.Encode(payload); err != nil {
			b.Fatal(err)
		}
		enc.Release()
		data := bytes.Clone(buf.Bytes())
		n := strconv.Itoa(size)
		b.Run("encode/"+n, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				buf.Reset()
				enc := ser.NewEncoder(&buf)
				if err := enc.Encode(payload); err != nil {
					b.Fatal(err)
				}
				enc.Release()
			}
		})
		b.Run("decode-ptr/"+n, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				d, err := ser.NewDecoder(data)
				if err != nil {
					b.Fatal(err)
				}
				var reply []byte
				if err := d.Decode(&reply); err != nil || len(reply) != size {
					b.Fatal(err, len(reply))
				}
				d.Release()
			}
		})
		b.Run("decode-bytes/"+n, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				d, err := ser.NewDecoder(data)
				if err != nil {
					b.Fatal(err)
				}
				arg, err := d.(serialize.BytesDecoder).DecodeBytes()
				if err != nil || len(arg) != size {
					b.Fatal(err, len(arg))
				}
				d.Release()
			}
		})
	}
}

// BenchmarkTableByID is the provider's lookup of a request's serializer,
// from as many goroutines as there are Ps.
func BenchmarkTableByID(b *testing.B) {
	t := serialize.Builtin()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := t.ByID(serialize.MsgpackID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkJSONDecode decodes json bodies as a provider does: a sequence
// of values (a call's head and a small struct argument), and one body of
// 100 monitor-report rows.
func BenchmarkJSONDecode(b *testing.B) {
	ser := serialize.NewJSON()
	var buf bytes.Buffer
	enc := ser.NewEncoder(&buf)
	for _, v := range []any{"demo.Greeter", "", "", "Greet", 1000, nil, 1, struct {
		Name string
		Age  int
	}{"j", 1}} {
		if err := enc.Encode(v); err != nil {
			b.Fatal(err)
		}
	}
	call := bytes.Clone(buf.Bytes())
	rows := make([]reportRow, 100)
	for i := range rows {
		rows[i] = reportRow{Side: "consumer", Application: "shop", Service: "demo.Greeter", Method: "SayHello",
			Calls: int64(i), FailuresByKind: map[string]int64{"timeout": 1}, Index: []int32{5, 900}, Count: []int64{19, 1}}
	}
	report, err := ser.Marshal(rows)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(call)))
		for b.Loop() {
			d, err := ser.NewDecoder(call)
			if err != nil {
				b.Fatal(err)
			}
			for range 4 {
				if _, err := d.DecodeString(); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := d.DecodeInt(); err != nil {
				b.Fatal(err)
			}
			if _, err := d.DecodeMap(serialize.MapLimits{}); err != nil {
				b.Fatal(err)
			}
			if _, err := d.DecodeInt(); err != nil {
				b.Fatal(err)
			}
			var p struct {
				Name string
				Age  int
			}
			if err := d.Decode(&p); err != nil {
				b.Fatal(err)
			}
			d.Release()
		}
	})
	// encoding/json allocates 7.4 times this body (one-entry maps), over
	// the default budget: it is decoded with a factor of 16.
	wide := serialize.NewJSONLimits(serialize.Limits{AllocFactor: 16})
	b.Run("report", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(report)))
		for b.Loop() {
			var got []reportRow
			if err := wide.Unmarshal(report, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
