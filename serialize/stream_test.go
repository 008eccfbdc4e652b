package serialize_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

// xmlStream is encoding/xml through the Stream door: it has no untyped
// decoding and no maps of its own, so the protocol's maps are written as
// a list of entries.
type xmlEntry struct{ K, V string }

type xmlEncoder struct{ e *xml.Encoder }

func (x xmlEncoder) Encode(v any) error {
	if m, ok := v.(map[string]string); ok {
		entries := []xmlEntry{}
		for k, v := range m {
			entries = append(entries, xmlEntry{k, v})
		}
		v = struct {
			XMLName xml.Name `xml:"map"`
			E       []xmlEntry
		}{E: entries}
	}
	return x.e.Encode(v)
}

type xmlDecoder struct{ d *xml.Decoder }

func (x xmlDecoder) Decode(p any) error {
	if _, ok := p.(*any); ok { // xml would leave it nil without a word
		return errors.New("xml: no untyped decoding")
	}
	if m, ok := p.(*map[string]string); ok {
		var w struct{ E []xmlEntry }
		if err := x.d.Decode(&w); err != nil {
			return err
		}
		*m = map[string]string{}
		for _, e := range w.E {
			(*m)[e.K] = e.V
		}
		return nil
	}
	return x.d.Decode(p)
}

func xmlSerializer() serialize.Serializer {
	return serialize.Stream("xml", 22,
		func(w io.Writer) serialize.StreamEncoder { return xmlEncoder{xml.NewEncoder(w)} },
		func(r io.Reader) serialize.StreamDecoder { return xmlDecoder{xml.NewDecoder(r)} })
}

// TestStream: a format added through serialize.Stream joins a Table and
// reads back what it wrote, the protocol's values (strings, integers,
// string maps within their limits) and a user's struct alike.
func TestStream(t *testing.T) {
	s := xmlSerializer()
	tb := serialize.Builtin()
	require.NoError(t, tb.Register(s))
	got, err := tb.ByID(22)
	require.NoError(t, err)
	require.Equal(t, "xml", got.Name())

	type point struct{ X, Y int }
	b, err := s.Marshal(point{1, 2})
	require.NoError(t, err)
	require.Equal(t, "<point><X>1</X><Y>2</Y></point>", string(b))
	var p point
	require.NoError(t, s.Unmarshal(b, &p))
	require.Equal(t, point{1, 2}, p)

	var buf bytes.Buffer
	enc := s.NewEncoder(&buf)
	require.NoError(t, enc.EncodeString("demo.Greeter"))
	require.NoError(t, enc.EncodeInt(-42))
	require.NoError(t, enc.EncodeMap(nil))
	require.NoError(t, enc.EncodeMap(map[string]string{"k": "v"}))
	require.NoError(t, enc.EncodeMap(map[string]string{"k": "too long"}))
	require.NoError(t, enc.Encode(point{3, 4}))
	require.NoError(t, enc.Encode("untyped"))
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
	lim := serialize.MapLimits{MaxEntries: 4, MaxValue: 4}
	m, err := dec.DecodeMap(lim)
	require.NoError(t, err)
	require.Nil(t, m, "nil and empty maps are written alike and read as nil")
	m, err = dec.DecodeMap(lim)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v"}, m)
	_, err = dec.DecodeMap(lim)
	require.ErrorIs(t, err, serialize.ErrLimit)
	require.ErrorContains(t, err, "map value of 8 bytes")
	require.NoError(t, dec.Decode(&p))
	require.Equal(t, point{3, 4}, p)
	_, err = dec.DecodeAny()
	require.EqualError(t, err, "xml: no untyped decoding")
}
