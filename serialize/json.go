package serialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// NewJSON returns the encoding/json serializer, named JSON with id JSONID.
// A sequence of values is written one JSON text per line. Before decoding
// it checks the bytes with CheckJSON. DecodeAny returns numbers as float64.
// A key a struct has no field for is an error (NewJSONLimits with
// AllowUnknownFields skips it).
//
// Only nesting is bounded (CheckJSON), not what decoding allocates: the
// allocation budget of Limits is msgpack's. Measured (go1.26): 900 KB of
// "{}," into a []struct of 64 bytes allocated 104 MB (115 bytes per input
// byte), into any 45 MB. Use json only with peers you trust.
func NewJSON() Serializer { return jsonSerializer{} }

// NewJSONLimits is NewJSON honouring l.AllowUnknownFields (the allocation
// limits apply to msgpack only).
func NewJSONLimits(l Limits) Serializer { return jsonSerializer{allowUnknown: l.AllowUnknownFields} }

type jsonSerializer struct{ allowUnknown bool }

func (jsonSerializer) Name() string                  { return JSON }
func (jsonSerializer) ID() byte                      { return JSONID }
func (jsonSerializer) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

func (s jsonSerializer) Unmarshal(data []byte, v any) error {
	if err := CheckJSON(data); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if !s.allowUnknown {
		d.DisallowUnknownFields()
	}
	return d.Decode(v)
}

func (jsonSerializer) NewEncoder(w io.Writer) Encoder {
	return &jsonEncoder{e: json.NewEncoder(w)}
}

func (s jsonSerializer) NewDecoder(data []byte) (Decoder, error) {
	if err := CheckJSON(data); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if !s.allowUnknown {
		d.DisallowUnknownFields()
	}
	return &jsonDecoder{d: d}, nil
}

type jsonEncoder struct{ e *json.Encoder }

func (e *jsonEncoder) Encode(v any) error          { return e.e.Encode(v) }
func (e *jsonEncoder) EncodeString(s string) error { return e.e.Encode(s) }
func (e *jsonEncoder) EncodeInt(n int64) error     { return e.e.Encode(n) }
func (e *jsonEncoder) EncodeMap(m map[string]string) error {
	if len(m) == 0 {
		return e.e.Encode(nil)
	}
	return e.e.Encode(m)
}
func (e *jsonEncoder) Release() {}

type jsonDecoder struct{ d *json.Decoder }

func (d *jsonDecoder) Decode(v any) error { return d.d.Decode(v) }
func (d *jsonDecoder) DecodeAny() (any, error) {
	var v any
	err := d.d.Decode(&v)
	return v, err
}
func (d *jsonDecoder) DecodeString() (s string, err error) {
	err = d.d.Decode(&s)
	return s, err
}
func (d *jsonDecoder) DecodeInt() (n int64, err error) {
	err = d.d.Decode(&n)
	return n, err
}
func (d *jsonDecoder) DecodeMap(l MapLimits) (map[string]string, error) {
	tok, err := d.d.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("serialize: json: want an object or null, got %v", tok)
	}
	l = l.withDefaults()
	var m map[string]string
	total, n := 0, 0
	for d.d.More() {
		n++
		var k, v string
		if tok, err = d.d.Token(); err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("serialize: json: object key %v", tok)
		}
		if err := d.d.Decode(&v); err != nil {
			return nil, err
		}
		total += len(k) + len(v)
		if err := l.check(n, total, k, v); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	if _, err := d.d.Token(); err != nil { // the closing brace
		return nil, err
	}
	return m, nil
}
func (d *jsonDecoder) Release() {}

// CheckJSON scans data and returns an error wrapping ErrLimit if its
// arrays and objects nest deeper than MaxDepth. It does not validate the
// rest of the syntax; the decoder does.
func CheckJSON(data []byte) error {
	depth := 0
	inString, escaped := false, false
	for i, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxDepth {
				return fmt.Errorf("%w: json nesting deeper than %d at offset %d", ErrLimit, MaxDepth, i)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
