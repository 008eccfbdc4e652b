package serialize_test

import (
	"testing"

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
