package serialize_test

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/minidubbo/minidubbo/serialize"
)

// FuzzMsgpackDecode feeds arbitrary bytes to the msgpack decoder, as a
// sequence of plain values and into a struct: it must return (an error or
// values), never crash or hang.
func FuzzMsgpackDecode(f *testing.F) {
	s := serialize.NewMsgpack()
	for _, v := range []any{nil, 1, "s", []any{1, "a", []int{2}}, map[string]any{"k": 1.5}, point{X: 1, Tags: []string{"t"}}} {
		b, err := s.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xdd, 0x01, 0x00, 0x00, 0x00})
	f.Add([]byte{0x91, 0x91, 0x91, 0x91})
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, err := s.NewDecoder(data)
		if err != nil {
			return
		}
		for range 64 {
			if _, err := dec.DecodeAny(); err != nil {
				break
			}
		}
		dec.Release()
		var p point
		_ = s.Unmarshal(data, &p)

		// Decoding into a *[]byte (empty, or with room to reuse) gives
		// what the msgpack library gives.
		for _, room := range []int{0, 64} {
			var got, want []byte
			if room > 0 {
				got, want = make([]byte, 0, room), make([]byte, 0, room)
			}
			errGot := s.Unmarshal(data, &got)
			errWant := msgpack.Unmarshal(data, &want)
			if errGot == nil && errWant != nil {
				t.Fatalf("decoded %q where msgpack fails: %v", got, errWant)
			}
			if errGot == nil && (!bytes.Equal(got, want) || (got == nil) != (want == nil)) {
				t.Fatalf("decoded %q (nil %v), msgpack %q (nil %v)", got, got == nil, want, want == nil)
			}
		}
	})
}

// FuzzJSONDecode does the same for json.
func FuzzJSONDecode(f *testing.F) {
	f.Add([]byte(`{"X":1,"Tags":["a"]}`))
	f.Add([]byte(`[[[[1]]]] "x" null`))
	s := serialize.NewJSON()
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, err := s.NewDecoder(data)
		if err != nil {
			return
		}
		for range 64 {
			if _, err := dec.DecodeAny(); err != nil {
				break
			}
		}
		var p point
		_ = s.Unmarshal(data, &p)
	})
}

// FuzzDecodeMap feeds arbitrary bytes to the attachment decoder of both
// serializers with limits: it returns a map within them or an error.
func FuzzDecodeMap(f *testing.F) {
	f.Add([]byte{0x81, 0xa1, 'k', 0xa1, 'v'})
	f.Add([]byte{0xdf, 0x00, 0x40, 0x00, 0x00, 0xa0, 0xa0, 0xa0, 0xa0}) // declares 4 Mi entries
	f.Add([]byte{0x85, 0xa1, 'a', 0xa0, 0xa1, 'b', 0xa0, 0xa1, 'c', 0xa0, 0xa1, 'd', 0xa0, 0xa1, 'e', 0xa0})
	f.Add([]byte(`{"k":"v","k2":"` + "xxxxxxxxxxxxxxxxxxxxxxxx" + `"}`))
	f.Add([]byte(`null`))
	lim := serialize.MapLimits{MaxEntries: 4, MaxKey: 8, MaxValue: 16, MaxBytes: 40}
	sers := []serialize.Serializer{serialize.NewMsgpack(), serialize.NewJSON()}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range sers {
			dec, err := s.NewDecoder(data)
			if err != nil {
				continue
			}
			m, err := dec.DecodeMap(lim)
			dec.Release()
			if err != nil {
				continue
			}
			total := 0
			for k, v := range m {
				if len(k) > lim.MaxKey || len(v) > lim.MaxValue {
					t.Fatalf("%s: entry over the limits: %q=%q", s.Name(), k, v)
				}
				total += len(k) + len(v)
			}
			if len(m) > lim.MaxEntries || total > lim.MaxBytes {
				t.Fatalf("%s: map over the limits: %d entries, %d bytes", s.Name(), len(m), total)
			}
		}
	})
}
