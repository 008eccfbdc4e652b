package serialize_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

type point struct {
	X, Y int
	Tags []string
	Meta map[string]any
}

func TestTableLookup(t *testing.T) {
	tb := serialize.Builtin()
	require.Equal(t, []string{"json", "msgpack"}, tb.Names())
	s, err := tb.Get("msgpack")
	require.NoError(t, err)
	require.Equal(t, byte(27), s.ID())
	s, err = tb.ByID(serialize.JSONID)
	require.NoError(t, err)
	require.Equal(t, "json", s.Name())

	_, err = tb.Get("hessian2")
	require.EqualError(t, err, `serialize: unknown serialization "hessian2" (known: json, msgpack)`)
	_, err = tb.ByID(2)
	require.EqualError(t, err, "serialize: unknown serialization id 2 (known: 16=json, 27=msgpack)")
	_, err = tb.ByID(200)
	require.Error(t, err)
}

type fake struct {
	serialize.Serializer
	name string
	id   byte
}

func (f fake) Name() string { return f.name }
func (f fake) ID() byte     { return f.id }

func TestTableRegister(t *testing.T) {
	tb := serialize.Builtin()
	require.NoError(t, tb.Register(fake{name: "raw", id: 1}))
	s, err := tb.ByID(1)
	require.NoError(t, err)
	require.Equal(t, "raw", s.Name())
	for name, f := range map[string]fake{
		"empty name": {name: "", id: 3},
		"taken name": {name: "json", id: 4},
		"taken id":   {name: "other", id: 27},
		"id too big": {name: "big", id: 32},
	} {
		t.Run(name, func(t *testing.T) { require.Error(t, tb.Register(f)) })
	}
	var empty serialize.Table
	require.NoError(t, empty.Register(fake{name: "raw", id: 1}))
	require.Equal(t, []string{"raw"}, empty.Names())
}

func serializers() []serialize.Serializer {
	return []serialize.Serializer{serialize.NewMsgpack(), serialize.NewJSON()}
}

func TestSequenceRoundTrip(t *testing.T) {
	for _, s := range serializers() {
		t.Run(s.Name(), func(t *testing.T) {
			var buf bytes.Buffer
			enc := s.NewEncoder(&buf)
			require.NoError(t, enc.EncodeString("demo.Greeter"))
			require.NoError(t, enc.EncodeInt(-42))
			require.NoError(t, enc.Encode(point{X: 1, Y: 2, Tags: []string{"a"}}))
			require.NoError(t, enc.Encode(nil))
			require.NoError(t, enc.Encode("plain"))
			require.NoError(t, enc.EncodeMap(map[string]string{"k": "v"}))
			require.NoError(t, enc.EncodeMap(nil))
			enc.Release()

			dec, err := s.NewDecoder(buf.Bytes())
			require.NoError(t, err)
			defer dec.Release()
			str, err := dec.DecodeString()
			require.NoError(t, err)
			require.Equal(t, "demo.Greeter", str)
			n, err := dec.DecodeInt()
			require.NoError(t, err)
			require.Equal(t, int64(-42), n)
			var p point
			require.NoError(t, dec.Decode(&p))
			require.Equal(t, point{X: 1, Y: 2, Tags: []string{"a"}}, p)
			v, err := dec.DecodeAny()
			require.NoError(t, err)
			require.Nil(t, v)
			v, err = dec.DecodeAny()
			require.NoError(t, err)
			require.Equal(t, "plain", v)
			m, err := dec.DecodeMap(serialize.MapLimits{})
			require.NoError(t, err)
			require.Equal(t, map[string]string{"k": "v"}, m)
			m, err = dec.DecodeMap(serialize.MapLimits{})
			require.NoError(t, err)
			require.Nil(t, m)
			_, err = dec.DecodeAny()
			require.Error(t, err, "past the end")
		})
	}
}

func TestMarshalUnmarshal(t *testing.T) {
	for _, s := range serializers() {
		t.Run(s.Name(), func(t *testing.T) {
			in := point{X: 3, Y: -4, Tags: []string{"x", "y"}, Meta: map[string]any{"a": "b"}}
			b, err := s.Marshal(in)
			require.NoError(t, err)
			var out point
			require.NoError(t, s.Unmarshal(b, &out))
			require.Equal(t, in, out)
			require.Error(t, s.Unmarshal(b[:len(b)-1], &out), "truncated")
		})
	}
}

func TestMsgpackDecodeAnyIsLoose(t *testing.T) {
	s := serialize.NewMsgpack()
	b, err := s.Marshal([]any{int8(1), uint16(2), float32(1.5), map[string]any{"k": []any{true, 5000}}, uint64(1 << 63), int64(1 << 40)})
	require.NoError(t, err)
	dec, err := s.NewDecoder(b)
	require.NoError(t, err)
	defer dec.Release()
	v, err := dec.DecodeAny()
	require.NoError(t, err)
	require.Equal(t, []any{int64(1), int64(2), float64(1.5), map[string]any{"k": []any{true, int64(5000)}}, uint64(1 << 63), int64(1 << 40)}, v)
}

func TestCheckMsgpackAcceptsValid(t *testing.T) {
	s := serialize.NewMsgpack()
	values := []any{
		nil, true, false, 0, 127, -1, -33, 255, 65535, int64(1 << 31), int64(-1 << 40), uint64(1 << 63),
		float32(1.25), 2.5, "", "short", strings.Repeat("s", 40), strings.Repeat("m", 300), strings.Repeat("l", 70000),
		[]byte{1, 2, 3}, make([]byte, 300), make([]byte, 70000),
		[]int{}, []int{1, 2, 3}, make([]int, 20), make([]int, 70000),
		map[string]int{}, map[string]int{"a": 1}, map[int]int{1: 2, 3: 4},
		[]any{[]any{[]any{"deep"}}, map[string]any{"x": []any{}}},
		point{X: 1, Tags: []string{"t"}},
	}
	for i, v := range values {
		b, err := s.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, serialize.CheckMsgpack(b), "value %d: %T % x", i, v, b[:min(len(b), 8)])
	}
	// A sequence of values is valid too.
	require.NoError(t, serialize.CheckMsgpack([]byte{0x01, 0xa1, 'x', 0x90, 0x80, 0xc0}))
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestMsgpackBombs(t *testing.T) {
	s := serialize.NewMsgpack()
	nest := bytes.Repeat([]byte{0x91}, 8_000_000)
	cases := []struct {
		name string
		data []byte
		into func() any
	}{
		{"array32 16M into []int64", []byte{0xdd, 0x01, 0x00, 0x00, 0x00}, func() any { return new([]int64) }},
		{"array32 16M into any", []byte{0xdd, 0x01, 0x00, 0x00, 0x00}, func() any { return new(any) }},
		{"array32 max into any", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, func() any { return new(any) }},
		{"map32 1M into map", []byte{0xdf, 0x00, 0x10, 0x00, 0x00}, func() any { return new(map[string]any) }},
		{"str32 2G into string", []byte{0xdb, 0x7f, 0xff, 0xff, 0xff}, func() any { return new(string) }},
		{"bin32 into bytes", []byte{0xc6, 0x7f, 0xff, 0xff, 0xff}, func() any { return new([]byte) }},
		{"ext32", []byte{0xc9, 0x7f, 0xff, 0xff, 0xff, 0x01}, func() any { return new(any) }},
		{"array16 in array", []byte{0x91, 0xdc, 0xff, 0xff, 0x01}, func() any { return new(any) }},
		{"8 MB of nested fixarray(1)", nest, func() any { return new(any) }},
		{"65 levels", bytes.Repeat([]byte{0x91}, 65), func() any { return new(any) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { err = s.Unmarshal(c.data, c.into()) })
			require.ErrorIs(t, err, serialize.ErrLimit)
			// Refused before the decoder runs: a few allocations at most.
			require.Less(t, n, uint64(64<<10), "allocated %d bytes for %d input bytes", n, len(c.data))
			_, err = s.NewDecoder(c.data)
			require.ErrorIs(t, err, serialize.ErrLimit)
		})
	}
}

func TestMsgpackDepthLimit(t *testing.T) {
	ok := append(bytes.Repeat([]byte{0x91}, serialize.MaxDepth-1), 0x01)
	require.NoError(t, serialize.CheckMsgpack(ok))
	var v any
	require.NoError(t, serialize.NewMsgpack().Unmarshal(ok, &v))
	deep := append(bytes.Repeat([]byte{0x91}, serialize.MaxDepth+1), 0x01)
	require.ErrorIs(t, serialize.CheckMsgpack(deep), serialize.ErrLimit)
}

func TestMsgpackMalformed(t *testing.T) {
	for name, data := range map[string][]byte{
		"unused code":      {0xc1},
		"truncated length": {0xdd, 0x00},
		"open array":       {0x92, 0x01},
		"short uint64":     {0xcf, 0x00},
	} {
		t.Run(name, func(t *testing.T) {
			require.Error(t, serialize.CheckMsgpack(data))
		})
	}
}

// TestMsgpackDecodeBounded decodes a large valid body into []any and checks
// that memory stays within a constant factor of the input size.
func TestMsgpackDecodeBounded(t *testing.T) {
	data := append([]byte{0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{0x01}, 1<<20)...)
	var v any
	// 1 Mi one-byte integers become 16 MiB of interfaces: over the default
	// budget (4× the body + 64 KiB), refused before decoding.
	var err error
	n := allocated(func() { err = serialize.NewMsgpack().Unmarshal(data, &v) })
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.Less(t, n, uint64(64<<10))
	// With a budget that allows it, decoded and bounded by it.
	s := serialize.NewMsgpackLimits(serialize.Limits{AllocFactor: 40})
	n = allocated(func() { require.NoError(t, s.Unmarshal(data, &v)) })
	require.Len(t, v, 1<<20)
	require.Less(t, n, uint64(40*len(data)), "allocated %d bytes for %d input bytes", n, len(data))
}

func TestJSONDepthLimit(t *testing.T) {
	s := serialize.NewJSON()
	deep := []byte(strings.Repeat("[", 8_000_000))
	var v any
	var err error
	n := allocated(func() { err = s.Unmarshal(deep, &v) })
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.Less(t, n, uint64(64<<10))
	_, err = s.NewDecoder(deep)
	require.ErrorIs(t, err, serialize.ErrLimit)

	ok := strings.Repeat("[", serialize.MaxDepth) + strings.Repeat("]", serialize.MaxDepth)
	require.NoError(t, s.Unmarshal([]byte(ok), &v))
	// Brackets inside strings do not count.
	require.NoError(t, s.Unmarshal([]byte(`"`+strings.Repeat(`[\"`, 100)+`"`), &v))
}

func TestDecodeTypeMismatch(t *testing.T) {
	for _, s := range serializers() {
		b, err := s.Marshal("text")
		require.NoError(t, err)
		var n int
		err = s.Unmarshal(b, &n)
		require.Error(t, err, s.Name())
		require.False(t, errors.Is(err, serialize.ErrLimit))
	}
}

func ExampleTable_Get() {
	t := serialize.Builtin()
	s, _ := t.Get("msgpack")
	fmt.Println(s.Name(), s.ID())
	_, err := t.Get("kryo")
	fmt.Println(err)
	// Output:
	// msgpack 27
	// serialize: unknown serialization "kryo" (known: json, msgpack)
}

type wide struct {
	A, B, C, D, E, F, G, H int64
}

// TestTypedSliceBomb: msgpack/v5 sizes a typed slice from its declared
// length, so 1 MiB of one-byte elements decoded into a slice of 64-byte
// structs would allocate 64 MiB. The decoder must refuse it, or decode it
// within its allocation budget.
func TestTypedSliceBomb(t *testing.T) {
	const n = 1 << 20
	data := make([]byte, 0, n+5)
	data = append(data, 0xdd, 0x00, 0x10, 0x00, 0x00)
	for range n {
		data = append(data, 0x80) // an empty map: a zero struct
	}
	s := serialize.NewMsgpack()
	var err error
	got := allocated(func() {
		var out []wide
		err = s.Unmarshal(data, &out)
	})
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.ErrorContains(t, err, "would allocate more than")
	budget := uint64(serialize.DefaultAllocFactor*len(data) + serialize.DefaultAllocSlack)
	require.Less(t, got, budget, "allocated %d bytes for %d bytes of input", got, len(data))

	// The same into []any, and maps of maps.
	got = allocated(func() {
		dec, e := s.NewDecoder(data)
		require.NoError(t, e)
		_, err = dec.DecodeAny()
		dec.Release()
	})
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.Less(t, got, budget)

	// A real slice of the same type within the budget decodes.
	in := make([]wide, 1000)
	for i := range in {
		in[i].A = int64(i) << 40
	}
	b, err := s.Marshal(in)
	require.NoError(t, err)
	var out []wide
	require.NoError(t, s.Unmarshal(b, &out))
	require.Equal(t, in, out)
}

// TestMapLimitsZeroIsTheDefault: a zero MapLimits bounds a map as
// DefaultMapLimits does, in every serializer (it used to mean no bound);
// NoLimit is the explicit way to lift one; negative fields are invalid.
func TestMapLimitsZeroIsTheDefault(t *testing.T) {
	require.NoError(t, serialize.MapLimits{}.Validate())
	require.EqualError(t, serialize.MapLimits{MaxKey: -1}.Validate(),
		"serialize: MaxKey -1 is negative (want 0 for the default 256, or more)")
	over := map[string]string{}
	for i := range serialize.DefaultMapEntries + 1 {
		over[strconv.Itoa(i)] = ""
	}
	bigValue := map[string]string{"k": strings.Repeat("v", serialize.DefaultMapValue+1)}
	for _, s := range serializers() {
		t.Run(s.Name(), func(t *testing.T) {
			decode := func(m map[string]string, lim serialize.MapLimits) error {
				var buf bytes.Buffer
				enc := s.NewEncoder(&buf)
				require.NoError(t, enc.EncodeMap(m))
				enc.Release()
				dec, err := s.NewDecoder(buf.Bytes())
				require.NoError(t, err)
				defer dec.Release()
				got, err := dec.DecodeMap(lim)
				if err == nil {
					require.Equal(t, m, got)
				}
				return err
			}
			for _, lim := range []serialize.MapLimits{{}, serialize.DefaultMapLimits(), {MaxEntries: -1, MaxValue: -1}} {
				require.ErrorIs(t, decode(over, lim), serialize.ErrLimit)
				require.ErrorIs(t, decode(bigValue, lim), serialize.ErrLimit)
				delete(over, "0")
				require.NoError(t, decode(over, lim), "exactly the default count")
				over["0"] = ""
			}
			require.NoError(t, decode(over, serialize.MapLimits{MaxEntries: serialize.NoLimit}))
			require.NoError(t, decode(bigValue, serialize.MapLimits{MaxValue: serialize.NoLimit}))
		})
	}
}

// TestMapLimits: attachments are read within count, key, value and total
// bounds, and a huge declared count is refused before anything is sized
// from it.
func TestMapLimits(t *testing.T) {
	lim := serialize.MapLimits{MaxEntries: 4, MaxKey: 8, MaxValue: 16, MaxBytes: 40}
	for _, s := range serializers() {
		t.Run(s.Name(), func(t *testing.T) {
			for name, tc := range map[string]struct {
				m    map[string]string
				want string
			}{
				"ok":          {map[string]string{"a": "1", "b": "2"}, ""},
				"entries":     {map[string]string{"a": "", "b": "", "c": "", "d": "", "e": ""}, "entries"},
				"key":         {map[string]string{"123456789": ""}, "map key of 9 bytes"},
				"value":       {map[string]string{"k": strings.Repeat("v", 17)}, "map value of 17 bytes"},
				"total bytes": {map[string]string{"k1": strings.Repeat("v", 16), "k2": strings.Repeat("w", 16), "k3": "xxxx"}, "more than 40 bytes"},
			} {
				var buf bytes.Buffer
				enc := s.NewEncoder(&buf)
				require.NoError(t, enc.EncodeMap(tc.m))
				enc.Release()
				dec, err := s.NewDecoder(buf.Bytes())
				require.NoError(t, err)
				m, err := dec.DecodeMap(lim)
				dec.Release()
				if tc.want == "" {
					require.NoError(t, err, name)
					require.Equal(t, tc.m, m)
					continue
				}
				require.ErrorIs(t, err, serialize.ErrLimit, name)
				require.ErrorContains(t, err, tc.want, name)
			}
		})
	}
	// map32 declaring 4 Mi entries over 8 MiB of two-byte pairs: the
	// count is refused at once; without a count bound the map grows only
	// with its distinct keys.
	const n = 4 << 20
	data := []byte{0xdf, 0x00, 0x40, 0x00, 0x00}
	data = append(data, bytes.Repeat([]byte{0xa0, 0xa0}, n)...)
	s := serialize.NewMsgpack()
	var err error
	got := allocated(func() {
		dec, e := s.NewDecoder(data)
		require.NoError(t, e)
		_, err = dec.DecodeMap(serialize.MapLimits{MaxEntries: 64})
		dec.Release()
	})
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.Less(t, got, uint64(64<<10))
	got = allocated(func() {
		dec, e := s.NewDecoder(data)
		require.NoError(t, e)
		_, err = dec.DecodeMap(serialize.MapLimits{MaxEntries: serialize.NoLimit, MaxBytes: serialize.NoLimit})
		dec.Release()
	})
	require.NoError(t, err)
	require.Less(t, got, uint64(64<<10), "one distinct key costs one entry, not 4 Mi")
}
