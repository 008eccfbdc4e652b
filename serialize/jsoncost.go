package serialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// jsonCost walks the JSON value at the start of data (after white space)
// as encoding/json would decode it into t (nil: skipped, costs nothing),
// and returns where it ends and what decoding it would allocate, counting
// up to limit. data has passed CheckJSON, so nesting is bounded. A key
// that no field of a struct takes is kept in unknown (the first one).
//
// encoding/json grows a slice one element at a time (reflect.Value.Grow,
// append for []any) and a map one entry at a time, so a slice costs every
// capacity it passes through, not only its last, and a map of more than
// 8 entries about twice its final size.
func jsonCost(data []byte, t reflect.Type, limit int64) (w jsonWalker) {
	w = jsonWalker{data: data, limit: limit}
	w.ws()
	w.value(t, 0)
	return w
}

type jsonWalker struct {
	data    []byte
	p       int
	cost    int64
	limit   int64
	err     error
	unknown string // the first key no struct field takes
	hasUnk  bool
}

func (w *jsonWalker) charge(n int64) {
	w.cost += n
	if w.cost > w.limit && w.err == nil {
		w.err = errOverBudget
	}
}

func (w *jsonWalker) fail(what string) {
	if w.err == nil {
		if w.p >= len(w.data) {
			w.err = fmt.Errorf("serialize: json: unexpected end of input (%s)", what)
		} else {
			w.err = fmt.Errorf("serialize: json: invalid character %q at offset %d (%s)", w.data[w.p], w.p, what)
		}
	}
	w.p = len(w.data)
}

func (w *jsonWalker) ws() {
	for w.p < len(w.data) {
		switch w.data[w.p] {
		case ' ', '\t', '\n', '\r':
			w.p++
		default:
			return
		}
	}
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	customTypes         sync.Map // reflect.Type -> bool
)

// custom reports whether encoding/json hands values of t to a method of
// t's (UnmarshalJSON or UnmarshalText).
func custom(t reflect.Type) bool {
	if v, ok := customTypes.Load(t); ok {
		return v.(bool)
	}
	p := reflect.PointerTo(t)
	c := t.Implements(jsonUnmarshalerType) || p.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
	customTypes.Store(t, c)
	return c
}

// value walks one value (w.p at its first byte) into t, and the white
// space after it.
func (w *jsonWalker) value(t reflect.Type, depth int) {
	if w.err != nil {
		return
	}
	if w.p >= len(w.data) {
		w.fail("a value")
		return
	}
	if depth > 2*MaxDepth {
		w.err = fmt.Errorf("%w: json nesting deeper than %d", ErrLimit, MaxDepth)
		return
	}
	c := w.data[w.p]
	// Pointers allocate their element unless the value is null.
	for t != nil && t.Kind() == reflect.Pointer && c != 'n' {
		w.charge(int64(t.Elem().Size()) + pointerBase)
		t = t.Elem()
	}
	if t != nil && t.Kind() != reflect.Interface && custom(t) {
		// A method decodes it: charge twice its text, whatever it is.
		start := w.p
		w.value(nil, depth)
		w.charge(2*int64(w.p-start) + sliceBase)
		return
	}
	switch {
	case c == '{':
		w.object(t, depth)
	case c == '[':
		w.array(t, depth)
	case c == '"':
		w.str(t)
	case c == '-' || (c >= '0' && c <= '9'):
		w.number(t)
	case c == 't':
		w.literal("true")
	case c == 'f':
		w.literal("false")
	case c == 'n':
		w.literal("null")
	default:
		w.fail("a value")
	}
	w.ws()
}

func (w *jsonWalker) literal(s string) {
	if !bytes.HasPrefix(w.data[w.p:], []byte(s)) {
		w.fail(s)
		return
	}
	w.p += len(s)
}

func (w *jsonWalker) number(t reflect.Type) {
	start := w.p
	for w.p < len(w.data) {
		c := w.data[w.p]
		if c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9') {
			w.p++
			continue
		}
		break
	}
	if t == nil {
		return
	}
	n := int64(w.p - start)
	if t.Kind() == reflect.Interface {
		// A boxed float64 (8 bytes, 16 under the race detector, which
		// does not pack small allocations), the text as a string.
		w.charge(16 + n)
		return
	}
	w.charge(n) // the text as a string, for strconv or json.Number
}

// scanString moves past the string at w.p and returns its raw length
// (between the quotes) and whether it has escapes.
func (w *jsonWalker) scanString() (n int, escaped bool) {
	w.p++ // the quote
	start := w.p
	for w.p < len(w.data) {
		switch w.data[w.p] {
		case '\\':
			escaped = true
			w.p += 2
			continue
		case '"':
			n = w.p - start
			w.p++
			return n, escaped
		}
		w.p++
	}
	w.fail("a string")
	return 0, false
}

func (w *jsonWalker) str(t reflect.Type) {
	n, escaped := w.scanString()
	if t == nil {
		return
	}
	c := int64(n) + 8
	if escaped {
		c += int64(n) + 16 // the unquoting buffer
	}
	if t.Kind() == reflect.Interface {
		c += strSize // boxed
	}
	w.charge(c)
}

// growCost is what growing a slice one element at a time to n elements
// of size bytes allocates: every capacity it passes through (as
// runtime.growslice picks them: doubling to 256, then about 1.25 times).
func growCost(n int, size int64) int64 {
	if size == 0 {
		return 0
	}
	var total int64
	c := 0
	for c < n {
		switch {
		case c == 0:
			c = 1
		case c < 256:
			c *= 2
		default:
			c += (c + 3*256) >> 2
		}
		total += (int64(c)*size + 15) &^ 15 // size classes: 16 bytes at least
	}
	return total
}

// jsonSliceBase is what decoding a slice costs beyond its growth (its
// header when boxed or made empty; the msgpack walk's sliceBase also
// counts msgpack/v5's own work).
const jsonSliceBase = 32

func (w *jsonWalker) array(t reflect.Type, depth int) {
	w.p++ // [
	w.ws()
	var elem reflect.Type
	limit := -1 // elements past it are skipped (Go arrays)
	var cost func(n int) int64
	switch {
	case t == nil:
	case t.Kind() == reflect.Slice:
		elem = t.Elem()
		size := int64(elem.Size())
		cost = func(n int) int64 { return jsonSliceBase + growCost(n, size) }
	case t.Kind() == reflect.Array:
		elem, limit = t.Elem(), t.Len()
	case t.Kind() == reflect.Interface:
		elem = anyType
		cost = func(n int) int64 { return jsonSliceBase + 24 + growCost(n, ifaceSize) }
	default: // refused by encoding/json, which skips it
	}
	n := 0
	if w.p < len(w.data) && w.data[w.p] == ']' {
		w.p++
	} else {
		for w.err == nil {
			e := elem
			if limit >= 0 && n >= limit {
				e = nil
			}
			w.value(e, depth+1)
			n++
			if w.err != nil || w.p >= len(w.data) {
				w.fail("an array")
				return
			}
			if w.data[w.p] == ',' {
				w.p++
				w.ws()
				continue
			}
			if w.data[w.p] == ']' {
				w.p++
				break
			}
			w.fail("an array")
			return
		}
	}
	if cost != nil {
		w.charge(cost(n))
	}
}

func (w *jsonWalker) object(t reflect.Type, depth int) {
	w.p++ // {
	w.ws()
	var fs *jsonFields
	var kt, vt reflect.Type
	var entry int64 // each entry's own cost: its key, the key's box
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fs = jsonFieldsOf(t)
	case t.Kind() == reflect.Map:
		kt, vt = t.Key(), t.Elem()
		entry = int64(kt.Size()) + 16
		w.charge(int64(vt.Size()) + pointerBase) // the one element value reused
	case t.Kind() == reflect.Interface:
		kt, vt = reflect.TypeFor[string](), anyType
		entry = 8
	default: // refused by encoding/json, which skips it
	}
	n := 0
	if w.p < len(w.data) && w.data[w.p] == '}' {
		w.p++
	} else {
		for w.err == nil {
			if w.p >= len(w.data) || w.data[w.p] != '"' {
				w.fail("an object key")
				return
			}
			kstart := w.p
			kn, escaped := w.scanString()
			if w.err != nil {
				return
			}
			key := w.data[kstart+1 : kstart+1+kn]
			w.ws()
			if w.p >= len(w.data) || w.data[w.p] != ':' {
				w.fail("a colon")
				return
			}
			w.p++
			w.ws()
			var into reflect.Type
			switch {
			case fs != nil:
				if escaped {
					var s string
					if json.Unmarshal(w.data[kstart:kstart+2+kn], &s) == nil {
						key = []byte(s)
					}
				}
				f := fs.match(key)
				if f == nil {
					if !w.hasUnk {
						w.hasUnk, w.unknown = true, string(key)
					}
				} else {
					into = f.t
					w.charge(f.extra)
				}
			case kt != nil:
				into = vt
				c := entry + int64(kn) + 8
				if escaped {
					c += int64(kn) + 16
				}
				w.charge(c)
			}
			w.value(into, depth+1)
			n++
			if w.err != nil || w.p >= len(w.data) {
				w.fail("an object")
				return
			}
			if w.data[w.p] == ',' {
				w.p++
				w.ws()
				continue
			}
			if w.data[w.p] == '}' {
				w.p++
				break
			}
			w.fail("an object")
			return
		}
	}
	if kt != nil {
		// Grown an entry at a time: past one group of 8 slots, every
		// table it passes through, about twice the last.
		kv := int64(kt.Size()) + int64(vt.Size())
		c := 2 * mapCost(n, kv)
		if n <= 8 {
			// One group: its header, 8 slots and control bytes
			// (measured: 281 bytes for a one-entry
			// map[string]int64 with its key, 302 under -race).
			c = 64 + 8*(kv+1)
		}
		w.charge(c)
	}
}

// jsonField is a key encoding/json decodes into a field of a struct:
// the field's type and what reaching it allocates (embedded pointers).
type jsonField struct {
	name  string
	t     reflect.Type
	extra int64
}

type jsonFields struct {
	byName map[string]*jsonField
	list   []*jsonField
}

// match finds the field for key as encoding/json does: the exact name,
// else one equal under Unicode case folding.
func (fs *jsonFields) match(key []byte) *jsonField {
	if f, ok := fs.byName[string(key)]; ok {
		return f
	}
	for _, f := range fs.list {
		if bytes.EqualFold(key, []byte(f.name)) {
			return f
		}
	}
	return nil
}

var jsonFieldCache sync.Map // reflect.Type -> *jsonFields

func jsonFieldsOf(t reflect.Type) *jsonFields {
	if fs, ok := jsonFieldCache.Load(t); ok {
		return fs.(*jsonFields)
	}
	type cand struct {
		f      jsonField
		depth  int
		tagged bool
	}
	var cands []cand
	var add func(t reflect.Type, depth int, extra int64)
	add = func(t reflect.Type, depth int, extra int64) {
		if depth > 8 {
			return
		}
		for i := range t.NumField() {
			sf := t.Field(i)
			ft := sf.Type
			if sf.Anonymous {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if !sf.IsExported() && et.Kind() != reflect.Struct {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			tagged := name != ""
			if sf.Anonymous && !tagged {
				et, more := ft, int64(0)
				if et.Kind() == reflect.Pointer {
					et, more = et.Elem(), int64(et.Elem().Size())+pointerBase
				}
				if et.Kind() == reflect.Struct {
					add(et, depth+1, extra+more)
					continue
				}
			}
			if !tagged {
				name = sf.Name
			}
			cands = append(cands, cand{jsonField{name, ft, extra}, depth, tagged})
		}
	}
	add(t, 0, 0)
	fs := &jsonFields{byName: map[string]*jsonField{}}
	// As encoding/json: of the fields of one name, the shallowest wins;
	// at one depth, the one tagged; else none does.
	for i, c := range cands {
		if _, done := fs.byName[c.f.name]; done {
			continue
		}
		best, ties := i, 0
		for j, d := range cands {
			if d.f.name != c.f.name || j == best {
				continue
			}
			b := cands[best]
			switch {
			case d.depth < b.depth || (d.depth == b.depth && d.tagged && !b.tagged):
				best, ties = j, 0
			case d.depth == b.depth && d.tagged == b.tagged:
				ties++
			}
		}
		if ties > 0 {
			fs.byName[c.f.name] = nil // ambiguous: no field takes it
			continue
		}
		f := cands[best].f
		fs.byName[c.f.name] = &f
		fs.list = append(fs.list, &f)
	}
	for k, f := range fs.byName {
		if f == nil {
			delete(fs.byName, k)
		}
	}
	jsonFieldCache.Store(t, fs)
	return fs
}
