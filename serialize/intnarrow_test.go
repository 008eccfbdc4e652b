package serialize_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/minidubbo/minidubbo/serialize"
	"github.com/stretchr/testify/require"
)

type narrow struct {
	A int8   `msgpack:"a"`
	B uint32 `msgpack:"b"`
}

// TestNarrowIntegers: msgpack/v5 sets an integer into any integer kind
// with reflect SetInt / SetUint, truncating without an error (300 into an
// int8 was 44, 5e9 into an int8 0, -1 into a uint64 2^64-1). The decoder
// refuses a number its Go type cannot hold, naming where, the number and
// the range, as a *TypeError; numbers that fit, up to the bounds, decode.
func TestNarrowIntegers(t *testing.T) {
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
		v    any
		into any
		want string
		path string
		typ  reflect.Type
	}{
		{"300 into int8", 300, new(int8), "serialize: got an integer (300), expected an integer from -128 to 127", "", reflect.TypeFor[int8]()},
		{"5e9 into int8", int64(5_000_000_000), new(int8), "serialize: got an integer (5000000000), expected an integer from -128 to 127", "", reflect.TypeFor[int8]()},
		{"-129 into int8", -129, new(int8), "serialize: got an integer (-129), expected an integer from -128 to 127", "", reflect.TypeFor[int8]()},
		{"40000 into int16", 40000, new(int16), "serialize: got an integer (40000), expected an integer from -32768 to 32767", "", reflect.TypeFor[int16]()},
		{"5e9 into int32", int64(5_000_000_000), new(int32), "serialize: got an integer (5000000000), expected an integer from -2147483648 to 2147483647", "", reflect.TypeFor[int32]()},
		{"256 into uint8", 256, new(uint8), "serialize: got an integer (256), expected an integer from 0 to 255", "", reflect.TypeFor[uint8]()},
		{"-1 into uint8", -1, new(uint8), "serialize: got an integer (-1), expected an integer from 0 to 255", "", reflect.TypeFor[uint8]()},
		{"2^32 into uint32", uint64(1) << 32, new(uint32), "serialize: got an integer (4294967296), expected an integer from 0 to 4294967295", "", reflect.TypeFor[uint32]()},
		{"-1 into uint64", int64(-1), new(uint64), "serialize: got an integer (-1), expected an integer from 0 to 18446744073709551615", "", reflect.TypeFor[uint64]()},
		{"2^64-1 into int64", uint64(math.MaxUint64), new(int64), "serialize: got an integer (18446744073709551615), expected an integer from -9223372036854775808 to 9223372036854775807", "", reflect.TypeFor[int64]()},
		{"2^64-1 into int", uint64(math.MaxUint64), new(int), "serialize: got an integer (18446744073709551615), expected an integer from " + rangeOfInt, "", reflect.TypeFor[int]()},
		{"-1 into *uint", -1, new(*uint), "serialize: got an integer (-1), expected an integer from 0 to " + maxUint, "", reflect.TypeFor[uint]()},
		{"struct field", map[string]any{"a": 1, "b": -5}, new(narrow), "serialize: b: got an integer (-5), expected an integer from 0 to 4294967295 (uint32)", "b", reflect.TypeFor[uint32]()},
		{"struct field int8", map[string]any{"a": 200}, new(narrow), "serialize: a: got an integer (200), expected an integer from -128 to 127 (int8)", "a", reflect.TypeFor[int8]()},
		{"slice element", []int{1, 2, 70000}, new([]int16), "serialize: [2]: got an integer (70000), expected an integer from -32768 to 32767 (int16)", "[2]", reflect.TypeFor[int16]()},
		{"map value", map[string]int{"k": 300}, new(map[string]uint8), `serialize: ["k"]: got an integer (300), expected an integer from 0 to 255 (uint8)`, `["k"]`, reflect.TypeFor[uint8]()},
		{"element of a struct slice", []any{map[string]any{"a": 1}, map[string]any{"a": -1000}}, new([]narrow), "serialize: [1].a: got an integer (-1000), expected an integer from -128 to 127 (int8)", "[1].a", reflect.TypeFor[int8]()},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decode(enc(c.v), c.into)
			require.EqualError(t, err, c.want)
			var te *serialize.TypeError
			require.ErrorAs(t, err, &te)
			require.Equal(t, c.path, te.Path)
			require.Equal(t, c.typ, te.Type)
			require.Error(t, te.Err)
			require.False(t, errors.Is(err, serialize.ErrLimit))
		})
	}

	// The bounds, and any integer into an interface, decode as before.
	var i8 int8
	require.NoError(t, decode(enc(math.MaxInt8), &i8))
	require.Equal(t, int8(math.MaxInt8), i8)
	require.NoError(t, decode(enc(math.MinInt8), &i8))
	require.Equal(t, int8(math.MinInt8), i8)
	var u32 uint32
	require.NoError(t, decode(enc(uint64(math.MaxUint32)), &u32))
	require.Equal(t, uint32(math.MaxUint32), u32)
	var i16 int16
	require.NoError(t, decode(enc(int64(math.MinInt16)), &i16))
	require.Equal(t, int16(math.MinInt16), i16)
	var u64 uint64
	require.NoError(t, decode(enc(uint64(math.MaxUint64)), &u64))
	require.Equal(t, uint64(math.MaxUint64), u64)
	var i64 int64
	require.NoError(t, decode(enc(int64(math.MinInt64)), &i64))
	require.Equal(t, int64(math.MinInt64), i64)
	var n narrow
	require.NoError(t, decode(enc(map[string]any{"a": -128, "b": uint64(math.MaxUint32)}), &n))
	require.Equal(t, narrow{A: -128, B: math.MaxUint32}, n)
	var a any
	require.NoError(t, decode(enc(int64(5_000_000_000)), &a))
	require.EqualValues(t, int64(5_000_000_000), a)
	var f32 float32 // floats take any integer, rounded, as before
	require.NoError(t, decode(enc(int64(5_000_000_000)), &f32))
	require.Equal(t, float32(5e9), f32)
}

var maxUint = strconv.FormatUint(math.MaxUint, 10)

var rangeOfInt = func() string {
	if math.MaxInt == math.MaxInt32 {
		return "-2147483648 to 2147483647"
	}
	return "-9223372036854775808 to 9223372036854775807"
}()

// TestNarrowIntegersJSON: encoding/json already refuses a number its Go
// type cannot hold; the json serializer keeps that.
func TestNarrowIntegersJSON(t *testing.T) {
	s := serialize.NewJSON()
	var i8 int8
	require.ErrorContains(t, s.Unmarshal([]byte("300"), &i8), "int8")
	var u uint32
	require.ErrorContains(t, s.Unmarshal([]byte("-1"), &u), "uint32")
	var n narrow
	err := s.Unmarshal([]byte(`{"A":200}`), &n)
	require.Error(t, err)
	var ute *json.UnmarshalTypeError
	require.ErrorAs(t, err, &ute)
	require.NoError(t, s.Unmarshal([]byte("-128"), &i8))
	require.Equal(t, int8(-128), i8)
}
