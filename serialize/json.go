package serialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// NewJSON returns the encoding/json serializer, named JSON with id JSONID,
// with the default Limits. A sequence of values is written one JSON text
// per line. Before decoding it checks the bytes with CheckJSON. DecodeAny
// returns numbers as float64. A key a struct has no field for is an error
// (NewJSONLimits with AllowUnknownFields skips it).
//
// What decoding allocates is bounded as msgpack's is: before decoding a
// value, the decoder walks its text with the Go type it decodes into and
// adds up what encoding/json will allocate (a slice every capacity it
// grows through, a map about twice its final tables, strings, base64
// bytes, pointers, boxed values of an interface), and refuses with an
// error wrapping ErrLimit a body that would allocate more than
// Limits.AllocFactor × its length + Limits.AllocSlack. Unbounded, 900 KB
// of "{}," into a []struct of 64 bytes allocated 104 MB (go1.26).
func NewJSON() Serializer { return NewJSONLimits(Limits{}) }

// NewJSONLimits returns the json serializer with limits l (zero fields:
// the defaults), allocation bounds and AllowUnknownFields alike.
func NewJSONLimits(l Limits) Serializer { return jsonSerializer{lim: l.withDefaults()} }

type jsonSerializer struct{ lim Limits }

func (jsonSerializer) Name() string                  { return JSON }
func (jsonSerializer) ID() byte                      { return JSONID }
func (jsonSerializer) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

func (s jsonSerializer) Unmarshal(data []byte, v any) error {
	d, err := s.NewDecoder(data)
	if err != nil {
		return err
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
	b := s.lim.budget(len(data))
	return &jsonDecoder{data: data, budget: b, lim: s.lim}, nil
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

// jsonDecoder decodes the values of data one after the other: each is
// walked (its end, its cost) and then decoded by json.Unmarshal from the
// input in place, so the input is not copied.
type jsonDecoder struct {
	data   []byte
	off    int
	budget int64  // allocation left for the values still to decode
	lim    Limits // with defaults
}

// next walks the next value as decoded into t, takes its cost from the
// budget and returns its text, or fails without decoding it.
func (d *jsonDecoder) next(t reflect.Type) ([]byte, error) {
	for d.off < len(d.data) && isSpace(d.data[d.off]) {
		d.off++
	}
	if d.off >= len(d.data) {
		return nil, io.EOF
	}
	// The walk's sums are short of what the runtime rounds allocations
	// up to (size classes) and of encoding/json's own work by up to 9%
	// (measured): a quarter more is charged.
	w := jsonCost(d.data[d.off:], t, d.budget*4/5)
	if w.err == errOverBudget {
		return nil, fmt.Errorf("%w: decoding %d bytes of json into %v would allocate more than the %d bytes allowed for a body of %d bytes (%d × the body + %d: raise serialize.Limits AllocFactor or AllocSlack)",
			ErrLimit, len(d.data)-d.off, t, d.lim.budget(len(d.data)), len(d.data), d.lim.AllocFactor, d.lim.AllocSlack)
	}
	if w.err != nil {
		return nil, w.err
	}
	if !d.lim.AllowUnknownFields && w.hasUnk {
		return nil, fmt.Errorf("json: unknown field %q", w.unknown)
	}
	raw := d.data[d.off : d.off+w.p]
	d.off += w.p
	d.budget -= w.cost * 5 / 4
	return raw, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *jsonDecoder) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return json.Unmarshal([]byte("null"), v) // encoding/json's own error
	}
	raw, err := d.next(rv.Type().Elem())
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
func (d *jsonDecoder) DecodeAny() (any, error) {
	var v any
	err := d.Decode(&v)
	return v, err
}
func (d *jsonDecoder) DecodeString() (s string, err error) {
	err = d.Decode(&s)
	return s, err
}
func (d *jsonDecoder) DecodeInt() (n int64, err error) {
	err = d.Decode(&n)
	return n, err
}

func (d *jsonDecoder) DecodeMap(l MapLimits) (map[string]string, error) {
	raw, err := d.next(nil) // bounded by l, not by the budget
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
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
	for dec.More() {
		n++
		var k, v string
		if tok, err = dec.Token(); err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("serialize: json: object key %v", tok)
		}
		if err := dec.Decode(&v); err != nil {
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
	if _, err := dec.Token(); err != nil { // the closing brace
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
