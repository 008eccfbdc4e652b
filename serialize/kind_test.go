package serialize_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

type item struct {
	SKU string `msgpack:"sku"`
	Qty int    `msgpack:"qty"`
}

type order struct {
	ID    int64          `msgpack:"id"`
	Items []item         `msgpack:"items"`
	Tags  map[string]int `msgpack:"tags"`
	At    time.Time      `msgpack:"at"`
}

// TestTypeErrors: a msgpack value of the wrong kind names what came (with
// the value, for a scalar), what the type takes and where in the value,
// for each way of decoding, and keeps the decoder's error in the chain.
func TestTypeErrors(t *testing.T) {
	s := serialize.NewMsgpack()
	enc := func(v any) []byte {
		b, err := s.Marshal(v)
		require.NoError(t, err)
		return b
	}
	decode := func(data []byte, into any) error {
		d, err := s.NewDecoder(data)
		require.NoError(t, err)
		defer d.Release()
		return d.Decode(into)
	}
	for _, c := range []struct {
		name string
		data []byte
		into any
		want string
		path string
		typ  reflect.Type
	}{
		{"int for string", enc(42), new(string), "serialize: got an integer (42), expected a string", "", reflect.TypeFor[string]()},
		{"negative int for string", enc(-3), new(string), "serialize: got an integer (-3), expected a string", "", reflect.TypeFor[string]()},
		{"big int for string", enc(int64(1) << 40), new(string), "serialize: got an integer (1099511627776), expected a string", "", reflect.TypeFor[string]()},
		{"string for int", enc("x"), new(int), `serialize: got a string ("x"), expected an integer`, "", reflect.TypeFor[int]()},
		{"bool for int", enc(true), new(int), "serialize: got a boolean (true), expected an integer", "", reflect.TypeFor[int]()},
		{"float for int", enc(1.5), new(int), "serialize: got a float (1.5), expected an integer", "", reflect.TypeFor[int]()},
		{"map for slice", enc(map[string]int{"a": 1}), new([]string), "serialize: got a map, expected an array", "", reflect.TypeFor[[]string]()},
		{"array for map", enc([]int{1}), new(map[string]int), "serialize: got an array, expected a map", "", reflect.TypeFor[map[string]int]()},
		{"string for struct", enc("order-1"), new(order), `serialize: got a string ("order-1"), expected a map`, "", reflect.TypeFor[order]()},
		{"int for bytes", enc(7), new([]byte), "serialize: got an integer (7), expected bytes or a string", "", reflect.TypeFor[[]byte]()},
		{"bytes for bool", enc([]byte("x")), new(bool), "serialize: got bytes, expected a boolean", "", reflect.TypeFor[bool]()},
		{"long string cut", enc("abcdefghijklmnopqrstuvwxyz0123456789"), new(float64),
			`serialize: got a string ("abcdefghijklmnopqrstuvwxyz012345"...), expected a number`, "", reflect.TypeFor[float64]()},
		{"struct field", enc(map[string]any{"id": "seven"}), new(order),
			`serialize: id: got a string ("seven"), expected an integer (int64)`, "id", reflect.TypeFor[int64]()},
		{"element of a field", enc(map[string]any{"items": []any{map[string]any{"sku": "a", "qty": 1}, map[string]any{"sku": 2}}}), new(order),
			"serialize: items[1].sku: got an integer (2), expected a string (string)", "items[1].sku", reflect.TypeFor[string]()},
		{"map value", enc(map[string]any{"tags": map[string]any{"red": 1, "blue": "x"}}), new(order),
			`serialize: tags["blue"]: got a string ("x"), expected an integer (int)`, `tags["blue"]`, reflect.TypeFor[int]()},
		{"pointer element", enc([]any{"a"}), new([]*int), `serialize: [0]: got a string ("a"), expected an integer (int)`, "[0]", reflect.TypeFor[int]()},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decode(c.data, c.into)
			require.EqualError(t, err, c.want)
			var te *serialize.TypeError
			require.ErrorAs(t, err, &te)
			require.Equal(t, c.path, te.Path)
			require.Equal(t, c.typ, te.Type)
			require.Error(t, te.Err, "the decoder's own error stays in the chain")
			require.ErrorContains(t, errors.Unwrap(err), "code=")
		})
	}

	// Nil, and what msgpack turns into the type, are no errors.
	var o order
	require.NoError(t, decode(enc(nil), &o))
	var f float64
	require.NoError(t, decode(enc(3), &f))
	require.Equal(t, 3.0, f)
	var str string
	require.NoError(t, decode(enc([]byte("b")), &str))
	require.Equal(t, "b", str)
	var ip *int
	require.NoError(t, decode(enc(nil), &ip))
	require.Nil(t, ip)

	// A type that decodes itself (time.Time) is not second-guessed: its own
	// error stands.
	err := decode(enc(map[string]any{"at": "yesterday"}), &o)
	require.Error(t, err)
	var te *serialize.TypeError
	require.False(t, errors.As(err, &te), "%v", err)

	// Errors that are not about kinds are unchanged: unknown fields,
	// limits.
	err = decode(enc(map[string]any{"nope": 1}), &o)
	require.ErrorContains(t, err, "nope")
	require.False(t, errors.As(err, &te), "%v", err)
	_, err = s.NewDecoder([]byte{0x92, 0x01}) // an array of 2 with 1 value
	require.Error(t, err)

	// The typed entry points name kinds as Decode does.
	typed := func(data []byte, f func(serialize.Decoder) error) error {
		d, err := s.NewDecoder(data)
		require.NoError(t, err)
		defer d.Release()
		return f(d)
	}
	err = typed(enc(42), func(d serialize.Decoder) error { _, err := d.DecodeString(); return err })
	require.EqualError(t, err, "serialize: got an integer (42), expected a string")
	err = typed(enc("x"), func(d serialize.Decoder) error { _, err := d.DecodeInt(); return err })
	require.EqualError(t, err, `serialize: got a string ("x"), expected an integer`)
	err = typed(enc([]int{1}), func(d serialize.Decoder) error { _, err := d.DecodeMap(serialize.MapLimits{}); return err })
	require.EqualError(t, err, "serialize: got an array, expected a map")
	err = typed(enc(map[string]any{"k": 1}), func(d serialize.Decoder) error { _, err := d.DecodeMap(serialize.MapLimits{}); return err })
	require.EqualError(t, err, `serialize: ["k"]: got an integer (1), expected a string (string)`)
	err = typed(enc(1.5), func(d serialize.Decoder) error { _, err := d.(serialize.BytesDecoder).DecodeBytes(); return err })
	require.EqualError(t, err, "serialize: got a float (1.5), expected bytes or a string")
	err = typed(enc(false), func(d serialize.Decoder) error {
		_, err := d.(serialize.BorrowingDecoder).DecodeBytesBorrowed()
		return err
	})
	require.EqualError(t, err, "serialize: got a boolean (false), expected bytes or a string")
}

// FuzzTypeErrors decodes arbitrary bytes into typed values: a wrong kind
// anywhere is a *TypeError that names what came and what goes, and
// explaining an error never panics (DecodeString, DecodeInt and DecodeMap
// have no recover).
func FuzzTypeErrors(f *testing.F) {
	s := serialize.NewMsgpack()
	for _, v := range []any{42, "x", map[string]any{"items": []any{map[string]any{"sku": 2}}}, []any{1.5, true}, map[string]any{"tags": map[string]any{"a": "b"}}} {
		b, err := s.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			var te *serialize.TypeError
			if errors.As(err, &te) && (te.Got == "" || te.Want == "" || te.Type == nil || te.Err == nil) {
				t.Fatalf("incomplete TypeError %+v", te)
			}
		}
		decoders := []func(serialize.Decoder) error{
			func(d serialize.Decoder) error { _, err := d.DecodeString(); return err },
			func(d serialize.Decoder) error { _, err := d.DecodeInt(); return err },
			func(d serialize.Decoder) error { _, err := d.DecodeMap(serialize.MapLimits{}); return err },
			func(d serialize.Decoder) error { _, err := d.(serialize.BytesDecoder).DecodeBytes(); return err },
			func(d serialize.Decoder) error { var o order; return d.Decode(&o) },
			func(d serialize.Decoder) error { var m map[string][]*item; return d.Decode(&m) },
		}
		for _, f := range decoders {
			d, err := s.NewDecoder(data)
			if err != nil {
				return
			}
			check(f(d))
			d.Release()
		}
	})
}

// TestTypeErrorWithinBudget: a body that fails to decode is explained (the
// walk that finds where it went wrong) within the allocation budget of
// its length, however many elements and entries the walk passes: the
// walk used to format a path step (an index, a quoted key) at each of
// them, 16 bytes and more per input byte when the mismatch came last or
// nowhere (1 MiB of nils into []byte: 16.8 MB allocated; 1 MiB of map
// entries with keys that quote long: 21.1 MB).
func TestTypeErrorWithinBudget(t *testing.T) {
	const n = 1 << 20
	nils := append([]byte{0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{0xc0}, n)...)
	// 8,192 entries, each key "kNNNNNN" and 113 bytes 0x01 (which a
	// quoted key writes as \x01, 4 bytes each), its value nil, the last
	// one's an integer.
	const entries = 8192
	keyed := []byte{0xde, entries >> 8, entries & 0xff}
	for i := range entries {
		keyed = append(keyed, 0xd9, 120)
		keyed = append(keyed, fmt.Sprintf("k%06d", i)...)
		keyed = append(keyed, bytes.Repeat([]byte{0x01}, 113)...)
		if i == entries-1 {
			keyed = append(keyed, 0x2a)
		} else {
			keyed = append(keyed, 0xc0)
		}
	}
	s := serialize.NewMsgpack()
	cases := []struct {
		name string
		data []byte
		into func() any
		want string // in the error
	}{
		{"1 MiB of nils into []byte", nils, func() any { return new([]byte) }, "decoding string/bytes length"},
		{"1 MiB of nils into [4]byte", nils, func() any { return new([4]byte) }, "decoding string/bytes length"},
		{"8 Ki string keys into map[string]string, the last value wrong", keyed, func() any { return new(map[string]string) },
			`["k008191\x01\x01`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := allocated(func() {
				dec, e := s.NewDecoder(c.data)
				require.NoError(t, e)
				err = dec.Decode(c.into())
				dec.Release()
			})
			require.Error(t, err)
			require.ErrorContains(t, err, c.want)
			budget := uint64(serialize.DefaultAllocFactor*len(c.data) + serialize.DefaultAllocSlack)
			require.Less(t, got, budget, "allocated %d bytes for %d bytes of input (%.1f×)", got, len(c.data), float64(got)/float64(len(c.data)))
			t.Logf("%d bytes of input: %d bytes allocated (%.2f×)", len(c.data), got, float64(got)/float64(len(c.data)))
		})
	}
}
