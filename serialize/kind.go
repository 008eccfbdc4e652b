package serialize

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// TypeError is a msgpack decoding error where the input holds a value of
// another kind than the Go type it is decoded into: an integer where a
// string goes, a map where an array goes. It says where in the value
// (Path), what came (Got, with the value when it is a scalar) and what the
// type wants, and wraps the decoder's own error. Match it with errors.As;
// a request whose argument fails so still matches status.ErrBadRequest.
type TypeError struct {
	// Path is where the value is, inside the one being decoded: "" for the
	// value itself, "age" for a struct field (by its msgpack name),
	// "items[3]" for an element, `tags["k"]` for a map's value.
	Path string
	// Got names what came: "an integer (42)", "a string (\"x\")", "a map",
	// "an array", "bytes", "a boolean (true)", "a float (1.5)".
	Got string
	// Want names what the type takes: "a string", "an integer", "a map",
	// "an array", "a boolean", "a number", "bytes or a string".
	Want string
	// Type is the Go type at Path.
	Type reflect.Type
	// Err is the decoder's error.
	Err error
}

// Error reads like "serialize: got an integer (42), expected a string" or,
// inside a value, "serialize: age: got a string ("x"), expected an
// integer (int)".
func (e *TypeError) Error() string {
	if e.Path == "" {
		return "serialize: got " + e.Got + ", expected " + e.Want
	}
	return fmt.Sprintf("serialize: %s: got %s, expected %s (%v)", e.Path, e.Got, e.Want, e.Type)
}

// Unwrap returns the decoder's error.
func (e *TypeError) Unwrap() error { return e.Err }

// explain turns err, the error of decoding the value at data[start:] into
// t, into a *TypeError when a value in it is of a kind t cannot take;
// other errors (limits, truncation, unknown fields) pass unchanged. It
// runs only after a decode failed.
func explain(data []byte, start int, t reflect.Type, err error) error {
	if err == nil || errors.Is(err, ErrLimit) || start < 0 || start >= len(data) {
		return err
	}
	k := kindChecker{walker: walker{data: data, p: start, limit: math.MaxInt64}}
	te := k.check(t, 0)
	if te == nil {
		return err
	}
	te.Path, te.Err = k.pathString(), err
	return te
}

// kindChecker walks a msgpack value against a Go type and stops at the
// first value whose kind the type cannot take. Where it cannot tell (nil,
// extensions, interfaces, types that decode themselves) it takes the
// value.
type kindChecker struct {
	walker
	path []step
}

// step is one level of a kindChecker's path, kept unformatted: the walk
// passes every element and entry of a value that may be as long as the
// body, and a path formatted at each (an index or a quoted key per
// element) cost 16 bytes and more per input byte for a mismatch found
// nowhere or at the end; only the path of the mismatch is formatted.
type step struct {
	kind  stepKind
	index int    // stepIndex: the element's index
	key   []byte // stepField, stepKey: the name or key, in the input
}

type stepKind uint8

const (
	stepIndex    stepKind = iota // [3]
	stepField                    // .name
	stepKey                      // ["k"]
	stepMapKey                   // .(key)
	stepOtherKey                 // […]
)

func (k *kindChecker) pathString() string {
	var b strings.Builder
	for i, s := range k.path {
		switch s.kind {
		case stepIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case stepKey:
			b.WriteString("[" + strconv.Quote(string(s.key)) + "]")
		case stepOtherKey:
			b.WriteString("[…]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			if s.kind == stepMapKey {
				b.WriteString("(key)")
			} else {
				b.Write(s.key)
			}
		}
	}
	return b.String()
}

// check walks one value into t and returns the mismatch, without Path
// and Err, or nil.
func (k *kindChecker) check(t reflect.Type, depth int) *TypeError {
	if k.err != nil || k.p >= len(k.data) || depth > 2*MaxDepth {
		return nil
	}
	c := k.data[k.p]
	for t != nil && t.Kind() == reflect.Pointer && c != msgpcode.Nil && !decodesItself(t) {
		t = t.Elem()
	}
	if t == nil || c == msgpcode.Nil || t.Kind() == reflect.Interface || decodesItself(t) || msgpcode.IsExt(c) {
		k.value(nil, depth)
		return nil
	}
	got := kindOfCode(c)
	if !takes(t, got) {
		return &TypeError{Got: k.describe(got), Want: wanted(t), Type: t}
	}
	if got == gotInt {
		if end, ok := k.intEnd(c); ok && !fitsInt(t, c, k.data[k.p+1:end]) {
			return &TypeError{Got: k.describe(got), Want: intRange(t), Type: t}
		}
	}
	switch got {
	case gotArray:
		n := k.header(c)
		for i := 0; i < n && k.err == nil; i++ {
			k.path = append(k.path, step{kind: stepIndex, index: i})
			if te := k.check(elemAt(t, i), depth+1); te != nil {
				return te
			}
			k.path = k.path[:len(k.path)-1]
		}
	case gotMap:
		n := k.header(c)
		for i := 0; i < n && k.err == nil; i++ {
			key, isStr := k.peekKey()
			var vt reflect.Type
			if t.Kind() == reflect.Struct {
				k.value(nil, depth+1)
				if isStr {
					vt = fieldsOf(t).byName[string(key)]
				}
			} else {
				k.path = append(k.path, step{kind: stepMapKey})
				if te := k.check(t.Key(), depth+1); te != nil {
					return te
				}
				k.path = k.path[:len(k.path)-1]
				vt = t.Elem()
			}
			switch {
			case t.Kind() == reflect.Struct:
				k.path = append(k.path, step{kind: stepField, key: key})
			case isStr:
				k.path = append(k.path, step{kind: stepKey, key: key})
			default:
				k.path = append(k.path, step{kind: stepOtherKey})
			}
			if te := k.check(vt, depth+1); te != nil {
				return te
			}
			k.path = k.path[:len(k.path)-1]
		}
	default:
		k.value(nil, depth)
	}
	return nil
}

// header moves past an array's or map's header (code c) and returns its
// number of elements or entries.
func (k *kindChecker) header(c byte) int {
	k.p++
	switch {
	case msgpcode.IsFixedMap(c), msgpcode.IsFixedArray(c):
		return int(c & 0x0f)
	case c == msgpcode.Array16 || c == msgpcode.Map16:
		return int(k.uint(2))
	case c == msgpcode.Array32 || c == msgpcode.Map32:
		return int(k.uint(4))
	}
	return 0
}

// elemAt is the type of element i of an array decoded into t.
func elemAt(t reflect.Type, i int) reflect.Type {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return t.Elem()
	case reflect.Struct:
		if fs := fieldsOf(t); i < len(fs.list) {
			return fs.list[i]
		}
	}
	return nil
}

// got is the kind of a msgpack value.
type got uint8

const (
	gotOther got = iota
	gotBool
	gotInt
	gotFloat
	gotString
	gotBytes
	gotArray
	gotMap
)

func kindOfCode(c byte) got {
	switch {
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		return gotInt
	case c == msgpcode.False || c == msgpcode.True:
		return gotBool
	case c == msgpcode.Float || c == msgpcode.Double:
		return gotFloat
	case msgpcode.IsString(c):
		return gotString
	case msgpcode.IsBin(c):
		return gotBytes
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return gotArray
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return gotMap
	}
	return gotOther
}

// takes reports whether msgpack/v5 decodes a value of kind g into t (a
// type that is not a pointer, an interface or one that decodes itself).
func takes(t reflect.Type, g got) bool {
	switch t.Kind() {
	case reflect.String:
		return g == gotString || g == gotBytes
	case reflect.Bool:
		return g == gotBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return g == gotInt
	case reflect.Float32, reflect.Float64:
		return g == gotInt || g == gotFloat
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return g == gotString || g == gotBytes || g == gotArray
		}
		return g == gotArray
	case reflect.Map:
		return g == gotMap
	case reflect.Struct:
		return g == gotMap || g == gotArray
	}
	return true // not a kind this check knows: no claim
}

// wanted names what t takes.
func wanted(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes or a string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "a map"
	}
	return "an integer"
}

// describe names the value at k.p, of kind g, with the value itself when
// it is a scalar (strings cut at 32 bytes).
func (k *kindChecker) describe(g got) string {
	w := walker{data: k.data, p: k.p}
	switch g {
	case gotBool:
		return "a boolean (" + strconv.FormatBool(k.data[k.p] == 0xc3) + ")"
	case gotInt:
		if v, ok := w.intValue(); ok {
			return "an integer (" + v + ")"
		}
		return "an integer"
	case gotFloat:
		if v, ok := w.floatValue(); ok {
			return "a float (" + v + ")"
		}
		return "a float"
	case gotString:
		if s, ok := k.peekString(); ok {
			if len(s) > 32 {
				return fmt.Sprintf("a string (%q...)", s[:32])
			}
			return fmt.Sprintf("a string (%q)", s)
		}
		return "a string"
	case gotBytes:
		return "bytes"
	case gotArray:
		return "an array"
	case gotMap:
		return "a map"
	}
	return "a value of another kind"
}

// intValue reads the integer at w.p as text.
func (w *walker) intValue() (string, bool) {
	c := w.data[w.p]
	w.p++
	switch {
	case c <= 0x7f:
		return strconv.Itoa(int(c)), true
	case c >= 0xe0:
		return strconv.Itoa(int(int8(c))), true
	}
	switch c {
	case 0xcc:
		return strconv.FormatUint(w.uint(1), 10), w.err == nil
	case 0xcd:
		return strconv.FormatUint(w.uint(2), 10), w.err == nil
	case 0xce:
		return strconv.FormatUint(w.uint(4), 10), w.err == nil
	case 0xcf:
		return strconv.FormatUint(w.uint(8), 10), w.err == nil
	case 0xd0:
		return strconv.Itoa(int(int8(w.uint(1)))), w.err == nil
	case 0xd1:
		return strconv.Itoa(int(int16(w.uint(2)))), w.err == nil
	case 0xd2:
		return strconv.Itoa(int(int32(w.uint(4)))), w.err == nil
	case 0xd3:
		return strconv.FormatInt(int64(w.uint(8)), 10), w.err == nil
	}
	return "", false
}

// floatValue reads the float at w.p as text.
func (w *walker) floatValue() (string, bool) {
	c := w.data[w.p]
	w.p++
	switch c {
	case 0xca:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(w.uint(4)))), 'g', -1, 32), w.err == nil
	case 0xcb:
		return strconv.FormatFloat(math.Float64frombits(w.uint(8)), 'g', -1, 64), w.err == nil
	}
	return "", false
}

var (
	customDecoderType     = reflect.TypeFor[msgpack.CustomDecoder]()
	unmarshalerType       = reflect.TypeFor[msgpack.Unmarshaler]()
	binaryUnmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textUnmarshalerType   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports whether t (or *t) decodes itself, so that any
// kind may be what it wants (time.Time, a registered custom decoder).
func decodesItself(t reflect.Type) bool {
	for _, it := range [...]reflect.Type{customDecoderType, unmarshalerType, binaryUnmarshalerType, textUnmarshalerType} {
		if t.Implements(it) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(it)) {
			return true
		}
	}
	return false
}

// intEnd returns the end of the integer of code c at k.p, if it is whole.
func (k *kindChecker) intEnd(c byte) (int, bool) {
	end := k.p + 1
	if c >= 0xcc && c <= 0xd3 {
		end += scalarSize(c)
	}
	return end, end <= len(k.data)
}
