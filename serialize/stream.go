package serialize

import (
	"bytes"
	"io"
)

// StreamEncoder writes values one after another, each with one Encode
// call: *gob.Encoder, *json.Encoder and *xml.Encoder have this method.
type StreamEncoder interface {
	Encode(v any) error
}

// StreamDecoder reads the values a StreamEncoder wrote, in order, each
// into v, a non-nil pointer: *gob.Decoder, *json.Decoder and *xml.Decoder
// have this method. Decoding into a *any gives the value without a
// declared type (for $echo and generic calls); a format that cannot do that
// must say so with an error (encoding/xml, for one, would silently leave
// it nil), and then only typed calls work with it.
type StreamDecoder interface {
	Decode(v any) error
}

// Stream returns a Serializer for a format of one's own, such as
// encoding/gob, from its two stream constructors, so that a format is a
// few lines rather than a Serializer, an Encoder and a Decoder:
//
//	gobs := serialize.Stream("gob", 20,
//		func(w io.Writer) serialize.StreamEncoder { return gob.NewEncoder(w) },
//		func(r io.Reader) serialize.StreamDecoder { return gob.NewDecoder(r) })
//
// A message is a sequence of values, each written with one Encode: the
// protocol's own are strings, int64s and map[string]string (written empty,
// never nil), the rest are the user's arguments and replies. name and id
// are the Serializer's; id must not be taken in the Table it joins.
//
// Decoding reads the body of one frame, already bounded by the payload
// limit; the format's decoder must itself refuse a declared length longer
// than its input (encoding/gob and encoding/json do). Attachment maps are
// checked against their MapLimits once decoded. newEncoder and newDecoder
// are called once per message and may be called concurrently.
func Stream(name string, id byte, newEncoder func(w io.Writer) StreamEncoder, newDecoder func(r io.Reader) StreamDecoder) Serializer {
	return &stream{name: name, id: id, enc: newEncoder, dec: newDecoder}
}

type stream struct {
	name string
	id   byte
	enc  func(io.Writer) StreamEncoder
	dec  func(io.Reader) StreamDecoder
}

func (s *stream) Name() string { return s.name }
func (s *stream) ID() byte     { return s.id }

func (s *stream) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := s.enc(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (s *stream) Unmarshal(data []byte, v any) error {
	return s.dec(bytes.NewReader(data)).Decode(v)
}

func (s *stream) NewEncoder(w io.Writer) Encoder { return streamEncoder{s.enc(w)} }

func (s *stream) NewDecoder(data []byte) (Decoder, error) {
	return streamDecoder{s.dec(bytes.NewReader(data))}, nil
}

type streamEncoder struct{ StreamEncoder }

func (e streamEncoder) EncodeString(v string) error { return e.Encode(v) }
func (e streamEncoder) EncodeInt(n int64) error     { return e.Encode(n) }
func (e streamEncoder) EncodeMap(m map[string]string) error {
	if m == nil {
		m = map[string]string{}
	}
	return e.Encode(m)
}
func (streamEncoder) Release() {}

type streamDecoder struct{ StreamDecoder }

func (d streamDecoder) DecodeAny() (v any, err error) {
	err = d.Decode(&v)
	return v, err
}

func (d streamDecoder) DecodeString() (v string, err error) {
	err = d.Decode(&v)
	return v, err
}

func (d streamDecoder) DecodeInt() (v int64, err error) {
	err = d.Decode(&v)
	return v, err
}

func (d streamDecoder) DecodeMap(l MapLimits) (map[string]string, error) {
	var m map[string]string
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	n, total := 0, 0
	for k, v := range m {
		n++
		total += len(k) + len(v)
		if err := l.check(n, total, k, v); err != nil {
			return nil, err
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

func (streamDecoder) Release() {}
