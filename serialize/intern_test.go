package serialize_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

// table is an Interner holding a fixed set of strings; it records the
// keys it was asked about.
type table struct {
	held map[string]string
	keys []string
}

func (t *table) Intern(b []byte, key string) string {
	t.keys = append(t.keys, key)
	if s, ok := t.held[string(b)]; ok {
		return s
	}
	return string(b)
}

func msgpackOf(t *testing.T, write func(serialize.Encoder)) []byte {
	var buf bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&buf)
	write(enc)
	enc.Release()
	return buf.Bytes()
}

func TestMsgpackDecodeStringIntern(t *testing.T) {
	held := "demo.Greeter"
	in := &table{held: map[string]string{held: held}}
	long := strings.Repeat("n", 300)
	data := msgpackOf(t, func(e serialize.Encoder) {
		for _, s := range []string{"demo.Greeter", "", "other", strings.Repeat("x", 70000), long} {
			require.NoError(t, e.EncodeString(s))
		}
		require.NoError(t, e.Encode(nil))
		require.NoError(t, e.Encode([]byte("bin")))
	})
	dec, err := serialize.NewMsgpack().NewDecoder(data)
	require.NoError(t, err)
	defer dec.Release()
	id := dec.(serialize.InterningDecoder)

	s, err := id.DecodeStringIntern(in, 0)
	require.NoError(t, err)
	require.Equal(t, held, s)
	require.Same(t, unsafe.StringData(held), unsafe.StringData(s), "the held string, not a copy")
	for _, want := range []string{"", "other", strings.Repeat("x", 70000)} { // fixstr, str8 and str32 headers
		s, err = id.DecodeStringIntern(in, 0)
		require.NoError(t, err)
		require.Equal(t, want, s)
	}
	_, err = id.DecodeStringIntern(in, 256)
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.ErrorContains(t, err, "string of 300 bytes, limit 256")
	// nil and bin read as DecodeString reads them.
	s, err = id.DecodeStringIntern(in, 0)
	require.NoError(t, err)
	require.Empty(t, s)
	s, err = id.DecodeStringIntern(in, 0)
	require.NoError(t, err)
	require.Equal(t, "bin", s)
	_, err = id.DecodeStringIntern(in, 0)
	require.Error(t, err, "end of input")
	// a value that is not a string
	dec2, err := serialize.NewMsgpack().NewDecoder(msgpackOf(t, func(e serialize.Encoder) { require.NoError(t, e.EncodeInt(7)) }))
	require.NoError(t, err)
	defer dec2.Release()
	_, err = dec2.(serialize.InterningDecoder).DecodeStringIntern(in, 0)
	require.Error(t, err)
}

func TestMsgpackDecodeMapInternMatchesDecodeMap(t *testing.T) {
	in := &table{held: map[string]string{"remote.application": "remote.application", "shop": "shop"}}
	lim := serialize.MapLimits{MaxEntries: 4, MaxKey: 32, MaxValue: 16, MaxBytes: 60}
	for name, m := range map[string]map[string]string{
		"empty":   {},
		"ok":      {"remote.application": "shop", "k": "v"},
		"entries": {"a": "", "b": "", "c": "", "d": "", "e": ""},
		"key":     {strings.Repeat("k", 33): ""},
		"value":   {"k": strings.Repeat("v", 17)},
		"total":   {"k1": strings.Repeat("v", 16), "k2": strings.Repeat("w", 16), "k3": strings.Repeat("x", 16), "k4": "y"},
	} {
		data := msgpackOf(t, func(e serialize.Encoder) { require.NoError(t, e.EncodeMap(m)) })
		dec, err := serialize.NewMsgpack().NewDecoder(data)
		require.NoError(t, err)
		want, wantErr := dec.DecodeMap(lim)
		dec.Release()
		dec, err = serialize.NewMsgpack().NewDecoder(data)
		require.NoError(t, err)
		in.keys = nil
		got, gotErr := dec.(serialize.InterningDecoder).DecodeMapIntern(lim, in)
		dec.Release()
		require.Equal(t, want, got, name)
		dec, err = serialize.NewMsgpack().NewDecoder(data)
		require.NoError(t, err)
		kept, keptErr := dec.(serialize.InterningDecoder).DecodeMapIntern(lim, &keeper{table: table{held: in.held}, kept: map[string]map[string]string{}})
		dec.Release()
		require.Equal(t, want, kept, name)
		if wantErr != nil {
			require.EqualError(t, keptErr, wantErr.Error(), name)
		}
		if wantErr != nil {
			require.ErrorIs(t, gotErr, serialize.ErrLimit, name)
			require.EqualError(t, gotErr, wantErr.Error(), name)
			continue
		}
		require.NoError(t, gotErr, name)
		if name == "ok" {
			require.ElementsMatch(t, []string{"", "remote.application", "", "k"}, in.keys, "keys, then values with their key")
			require.Same(t, unsafe.StringData(in.held["shop"]), unsafe.StringData(got["remote.application"]))
		}
	}
}

// keeper is a table that keeps every map offered to it.
type keeper struct {
	table
	kept    map[string]map[string]string
	offered int
}

func (k *keeper) InternMap(enc []byte) map[string]string { return k.kept[string(enc)] }
func (k *keeper) KeepMap(enc []byte, m map[string]string) {
	k.offered++
	k.kept[string(enc)] = m
}

// A MapInterner gets small maps offered once decoded, and gives the kept
// map back for the same bytes; limits fail as without it.
func TestMsgpackDecodeMapInternKeeps(t *testing.T) {
	in := &keeper{table: table{held: map[string]string{}}, kept: map[string]map[string]string{}}
	lim := serialize.MapLimits{MaxEntries: 8, MaxKey: 32, MaxValue: 16, MaxBytes: 100}
	decode := func(m map[string]string) (map[string]string, error) {
		data := msgpackOf(t, func(e serialize.Encoder) {
			require.NoError(t, e.EncodeMap(m))
			require.NoError(t, e.EncodeString("after"))
		})
		dec, err := serialize.NewMsgpack().NewDecoder(data)
		require.NoError(t, err)
		defer dec.Release()
		got, err := dec.(serialize.InterningDecoder).DecodeMapIntern(lim, in)
		if err == nil {
			s, err := dec.DecodeString()
			require.NoError(t, err)
			require.Equal(t, "after", s, "the decoder is past the map")
		}
		return got, err
	}
	app := map[string]string{"remote.application": "shop"}
	first, err := decode(app)
	require.NoError(t, err)
	require.Equal(t, app, first)
	require.Equal(t, 1, in.offered)
	again, err := decode(app)
	require.NoError(t, err)
	require.Equal(t, reflect.ValueOf(first).Pointer(), reflect.ValueOf(again).Pointer(), "the kept map")
	require.Equal(t, 1, in.offered)
	other, err := decode(map[string]string{"remote.application": "shoq"})
	require.NoError(t, err)
	require.Equal(t, "shoq", other["remote.application"])
	require.Equal(t, 2, in.offered)

	// Over four entries: decoded as before, not offered.
	five := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	got, err := decode(five)
	require.NoError(t, err)
	require.Equal(t, five, got)
	require.Equal(t, 2, in.offered)

	// A map over a limit is refused before anything is looked up.
	_, err = decode(map[string]string{"k": strings.Repeat("v", 17)})
	require.ErrorIs(t, err, serialize.ErrLimit)
	_, err = decode(map[string]string{"key-one-10": strings.Repeat("v", 16), "key-two-10": strings.Repeat("w", 16),
		"key-three0": strings.Repeat("x", 16), "key-four10": strings.Repeat("y", 16)}) // 104 bytes
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.Equal(t, 2, in.offered)
}
