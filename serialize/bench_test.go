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
