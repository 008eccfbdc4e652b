package serialize_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/minidubbo/minidubbo/serialize"
)

// TestMsgpackStringsAndBytesMatchLibrary decodes strings and byte slices
// of every msgpack form (nil, fixstr, str8/16/32, bin8/16/32, empty, and
// values of other kinds) with DecodeString, Decode into a *string,
// DecodeBytes and Decode into a *[]byte, and wants what the msgpack
// library itself gives: the same value (nil stays nil, empty stays empty
// and non-nil) or an error when it fails.
func TestMsgpackStringsAndBytesMatchLibrary(t *testing.T) {
	str32 := []byte{0xdb, 0, 0, 0, 3, 'a', 'b', 'c'}
	bin32 := []byte{0xc6, 0, 0, 0, 2, 'x', 'y'}
	values := map[string][]byte{"str32": str32, "bin32": bin32}
	for name, v := range map[string]any{
		"nil": nil, "empty string": "", "fixstr": "hello", "str8": strings.Repeat("s", 200),
		"str16": strings.Repeat("m", 70000%65536), "long": strings.Repeat("l", 70000),
		"empty bin": []byte{}, "bin8": []byte("bytes"), "bin16": make([]byte, 300),
		"int": 42, "map": map[string]int{"a": 1}, "bool": true,
	} {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		values[name] = b
	}
	ser := serialize.NewMsgpack()
	for name, enc := range values {
		for _, cut := range []int{0, 1} { // whole, and missing its last byte
			data := enc[:len(enc)-cut]
			t.Run(fmt.Sprintf("%s/cut%d", name, cut), func(t *testing.T) {
				var wantS string
				errS := msgpack.Unmarshal(data, &wantS)
				var wantB []byte
				errB := msgpack.Unmarshal(data, &wantB)

				decode := func(f func(serialize.Decoder) (any, error)) (any, error) {
					d, err := ser.NewDecoder(data)
					if err != nil {
						return nil, err // CheckMsgpack refuses what is truncated
					}
					defer d.Release()
					return f(d)
				}
				for what, f := range map[string]func(serialize.Decoder) (any, error){
					"DecodeString": func(d serialize.Decoder) (any, error) { return d.DecodeString() },
					"Decode *string": func(d serialize.Decoder) (any, error) {
						var s string
						err := d.Decode(&s)
						return s, err
					},
				} {
					got, err := decode(f)
					if errS != nil {
						assert.Error(t, err, what)
						continue
					}
					require.NoError(t, err, what)
					assert.Equal(t, wantS, got, what)
				}
				for what, f := range map[string]func(serialize.Decoder) (any, error){
					"DecodeBytes": func(d serialize.Decoder) (any, error) { return d.(serialize.BytesDecoder).DecodeBytes() },
					"DecodeBytesBorrowed": func(d serialize.Decoder) (any, error) {
						return d.(serialize.BorrowingDecoder).DecodeBytesBorrowed()
					},
					"Decode *[]byte": func(d serialize.Decoder) (any, error) {
						var b []byte
						err := d.Decode(&b)
						return b, err
					},
				} {
					got, err := decode(f)
					if errB != nil {
						assert.Error(t, err, what)
						continue
					}
					require.NoError(t, err, what)
					assert.Equal(t, wantB, got, what)
					assert.Equal(t, wantB == nil, got.([]byte) == nil, "%s: nil is nil, empty is empty", what)
				}
			})
		}
	}
}

// TestMsgpackDecodeBytesOwnsItsCopy: the bytes DecodeBytes and
// DecodeString return stay as they were when the body is overwritten
// (the provider's request body is reused after the call).
func TestMsgpackDecodeBytesOwnsItsCopy(t *testing.T) {
	body, err := msgpack.Marshal("payload")
	require.NoError(t, err)
	body = append(body, body...)
	d, err := serialize.NewMsgpack().NewDecoder(body)
	require.NoError(t, err)
	defer d.Release()
	b, err := d.(serialize.BytesDecoder).DecodeBytes()
	require.NoError(t, err)
	s, err := d.DecodeString()
	require.NoError(t, err)
	for i := range body {
		body[i] = 'X'
	}
	assert.Equal(t, "payload", string(b))
	assert.Equal(t, "payload", s)
}

// TestMsgpackDecodeBytesBorrowedAliasesBody: DecodeBytesBorrowed gives
// the value's bytes in the body itself (a change of the body shows), its
// capacity ending with the value, and decoding goes on after it.
func TestMsgpackDecodeBytesBorrowedAliasesBody(t *testing.T) {
	var body bytes.Buffer
	enc := msgpack.NewEncoder(&body)
	require.NoError(t, enc.Encode([]byte("lent")))
	require.NoError(t, enc.Encode("after"))
	data := body.Bytes()
	d, err := serialize.NewMsgpack().NewDecoder(data)
	require.NoError(t, err)
	defer d.Release()
	b, err := d.(serialize.BorrowingDecoder).DecodeBytesBorrowed()
	require.NoError(t, err)
	assert.Equal(t, "lent", string(b))
	assert.Equal(t, len(b), cap(b), "capacity ends with the value")
	s, err := d.DecodeString()
	require.NoError(t, err)
	assert.Equal(t, "after", s)
	copy(data[2:], "LENT") // after bin8's header of 2 bytes
	assert.Equal(t, "LENT", string(b))
}

// TestMsgpackDecodeIntoBytesReusesAsLibrary: decoding into a *[]byte that
// already holds a slice gives what the msgpack library gives, and reuses
// the slice's array exactly when the library does (when it has room).
func TestMsgpackDecodeIntoBytesReusesAsLibrary(t *testing.T) {
	ser := serialize.NewMsgpack()
	for _, v := range []any{nil, []byte{}, "", []byte("abc"), strings.Repeat("s", 300), make([]byte, 500), 7} {
		data, err := msgpack.Marshal(v)
		require.NoError(t, err)
		for _, room := range []int{0, 3, 400, 1000} {
			t.Run(fmt.Sprintf("%T-%d/room%d", v, len(data), room), func(t *testing.T) {
				fill := func() []byte {
					if room == 0 {
						return nil
					}
					b := make([]byte, 2, room)
					b[0], b[1] = 'z', 'z'
					return b
				}
				want := fill()
				wantArr := want
				errLib := msgpack.Unmarshal(data, &want)

				d, err := ser.NewDecoder(data)
				require.NoError(t, err)
				defer d.Release()
				got := fill()
				gotArr := got
				err = d.Decode(&got)
				if errLib != nil {
					require.Error(t, err)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, want, got)
				assert.Equal(t, want == nil, got == nil, "nil is nil, empty is empty")
				sameLib := len(want) > 0 && cap(wantArr) > 0 && &want[:1][0] == &wantArr[:1][0]
				sameOurs := len(got) > 0 && cap(gotArr) > 0 && &got[:1][0] == &gotArr[:1][0]
				assert.Equal(t, sameLib, sameOurs, "array reused")
			})
		}
	}
}

// TestMsgpackBytesHeaderEncodes: a header from EncodeBytesHeader followed
// by the bytes is what Encode of the []byte writes.
func TestMsgpackBytesHeaderEncodes(t *testing.T) {
	ser := serialize.NewMsgpack()
	for _, n := range []int{0, 5, 300, 70000} {
		p := []byte(strings.Repeat("b", n))
		var want, got bytes.Buffer
		e := ser.NewEncoder(&want)
		require.NoError(t, e.Encode(p))
		e.Release()
		e = ser.NewEncoder(&got)
		require.NoError(t, e.(serialize.BytesHeaderEncoder).EncodeBytesHeader(n))
		e.Release()
		got.Write(p)
		require.Equal(t, want.Bytes(), got.Bytes(), "%d bytes", n)
	}
}
