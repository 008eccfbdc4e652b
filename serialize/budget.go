package serialize

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strings"
	"sync"

	"github.com/minidubbo/minidubbo/internal/optcheck"
)

// Defaults of Limits.
const (
	// DefaultAllocFactor is how many bytes of Go values decoding may
	// allocate per byte of input, on top of DefaultAllocSlack. It was 3
	// while maps were charged 16 bytes an entry: charged what they cost,
	// a monitor report of 1000 rows with failures (a one-entry map each)
	// allocates 4.1 times its body and needs 4.
	DefaultAllocFactor = 4
	// DefaultAllocSlack is the allocation every input may use whatever its
	// size.
	DefaultAllocSlack = 64 << 10
)

// Limits bound what a decoder allocates for one body. As in every layer's
// options: a zero field means the default (DefaultLimits shows them); a
// negative one is invalid (Validate). The constructors that take Limits
// cannot return an error, so check Limits with Validate before: they use
// the default in place of a negative field.
//
// The msgpack decoder walks the bytes with the Go type they decode into
// before decoding them, adds up what the decode would allocate (slices
// sized from their declared length times the element size, maps, strings,
// boxed values), and refuses with an error wrapping ErrLimit a body that
// would allocate more than AllocFactor × its length + AllocSlack. This
// matters because msgpack/v5 sizes a typed slice from the declared length:
// a 1-byte nil per element decoded into []struct{...64 bytes...} would
// otherwise cost 64 bytes per input byte. The json decoder does the same
// with the JSON text (NewJSON): encoding/json grows slices and maps an
// element at a time, so 3 bytes of "{}," cost 115 bytes unbounded.
type Limits struct {
	AllocFactor int
	AllocSlack  int
	// AllowUnknownFields makes decoding into a struct skip keys the struct
	// has no field for. By default such a key is an error naming it, so a
	// wrong struct or a misspelt JSON key is not silently read as zero
	// values; allow them during rolling upgrades that add fields.
	AllowUnknownFields bool
}

// DefaultLimits returns the defaults of every field.
func DefaultLimits() Limits {
	return Limits{AllocFactor: DefaultAllocFactor, AllocSlack: DefaultAllocSlack}
}

// Validate returns an error naming the first negative field.
func (l Limits) Validate() error {
	return optcheck.NonNegative("serialize",
		optcheck.Field{Name: "AllocFactor", Value: int64(l.AllocFactor), Default: DefaultAllocFactor},
		optcheck.Field{Name: "AllocSlack", Value: int64(l.AllocSlack), Default: DefaultAllocSlack},
	)
}

func (l Limits) withDefaults() Limits {
	if l.AllocFactor <= 0 {
		l.AllocFactor = DefaultAllocFactor
	}
	if l.AllocSlack <= 0 {
		l.AllocSlack = DefaultAllocSlack
	}
	return l
}

// budget returns the allocation allowed for a body of n bytes.
func (l Limits) budget(n int) int64 {
	return int64(l.AllocFactor)*int64(n) + int64(l.AllocSlack)
}

// Defaults of MapLimits: the bounds of one request's or response's
// attachments. DefaultMapLimits returns them all.
const (
	// DefaultMapEntries bounds the number of entries.
	DefaultMapEntries = 64
	// DefaultMapKey bounds the length of one key.
	DefaultMapKey = 256
	// DefaultMapValue bounds the length of one value.
	DefaultMapValue = 8 << 10
	// DefaultMapBytes bounds the sum of the lengths of keys and values.
	DefaultMapBytes = 64 << 10
)

// NoLimit, as a MapLimits field, lifts that bound. It is the one way to
// ask for no bound: zero means the default.
const NoLimit = math.MaxInt

// MapLimits bound a string map read by Decoder.DecodeMap (call
// attachments). As in every layer's options: a zero field means the
// default (DefaultMapLimits shows them), a negative one is invalid
// (Validate; the decoders use the default in its place), and NoLimit
// lifts a bound.
type MapLimits struct {
	// MaxEntries bounds the number of entries (default DefaultMapEntries).
	MaxEntries int
	// MaxKey and MaxValue bound the length of one key and one value
	// (default DefaultMapKey and DefaultMapValue).
	MaxKey, MaxValue int
	// MaxBytes bounds the sum of the lengths of all keys and values
	// (default DefaultMapBytes).
	MaxBytes int
}

// DefaultMapLimits returns the limits a zero MapLimits stands for.
func DefaultMapLimits() MapLimits {
	return MapLimits{MaxEntries: DefaultMapEntries, MaxKey: DefaultMapKey, MaxValue: DefaultMapValue, MaxBytes: DefaultMapBytes}
}

// Validate returns an error naming the first negative field.
func (l MapLimits) Validate() error {
	return optcheck.NonNegative("serialize",
		optcheck.Field{Name: "MaxEntries", Value: int64(l.MaxEntries), Default: DefaultMapEntries},
		optcheck.Field{Name: "MaxKey", Value: int64(l.MaxKey), Default: DefaultMapKey},
		optcheck.Field{Name: "MaxValue", Value: int64(l.MaxValue), Default: DefaultMapValue},
		optcheck.Field{Name: "MaxBytes", Value: int64(l.MaxBytes), Default: DefaultMapBytes},
	)
}

// withDefaults returns l with every zero or negative field set to its
// default.
func (l MapLimits) withDefaults() MapLimits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMapEntries
	}
	if l.MaxKey <= 0 {
		l.MaxKey = DefaultMapKey
	}
	if l.MaxValue <= 0 {
		l.MaxValue = DefaultMapValue
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMapBytes
	}
	return l
}

// check returns an error wrapping ErrLimit if adding k, v (the entry
// number n, 1-based, with total bytes so far) breaks l, whose fields are
// set (withDefaults).
func (l MapLimits) check(n, total int, k, v string) error { return checkEntry(l, n, total, k, v) }

// checkBytes is check of an entry still in the decoder's bytes.
func (l MapLimits) checkBytes(n, total int, k, v []byte) error { return checkEntry(l, n, total, k, v) }

func checkEntry[S string | []byte](l MapLimits, n, total int, k, v S) error {
	switch {
	case n > l.MaxEntries:
		return fmt.Errorf("%w: map of more than %d entries", ErrLimit, l.MaxEntries)
	case len(k) > l.MaxKey:
		return fmt.Errorf("%w: map key of %d bytes (%.32q...), limit %d", ErrLimit, len(k), k, l.MaxKey)
	case len(v) > l.MaxValue:
		return fmt.Errorf("%w: map value of %d bytes for key %.64q, limit %d", ErrLimit, len(v), k, l.MaxValue)
	case total > l.MaxBytes:
		return fmt.Errorf("%w: map of more than %d bytes of keys and values", ErrLimit, l.MaxBytes)
	}
	return nil
}

// checkEntries returns an error wrapping ErrLimit if a map declares more
// entries than l (withDefaults) allows, before any is read.
func (l MapLimits) checkEntries(n int) error {
	if n > l.MaxEntries {
		return fmt.Errorf("%w: map of %d entries, limit %d", ErrLimit, n, l.MaxEntries)
	}
	return nil
}

var (
	anyType   = reflect.TypeFor[any]()
	ifaceSize = int64(reflect.TypeFor[any]().Size())
	strSize   = int64(reflect.TypeFor[string]().Size())
)

// mapCost bounds what decoding a map of n entries of kv bytes (key and
// value) allocates, beyond what its keys and values point to. A Go map
// stores entries in groups of 8 slots, each with a control byte: any
// entry at all costs a whole group, and a larger map's slots are about
// 8/7 of its entries rounded up to a power of two, in tables of at most
// 1024 slots, plus its header and the decoder's own work (about 190
// bytes). Measured (go1.26, msgpack v5): 355 bytes for a one-entry
// map[string]string, 683 for 9 entries, 85 KB for 1000; 319 for a
// one-entry map[int64]int64, 934 for 16. Counting 16 bytes per entry, as
// before, undercharged a one-entry map 7 times.
func mapCost(n int, kv int64) int64 {
	if n <= 0 {
		return mapBase
	}
	slots := int64(8)
	if n > 8 {
		slots = 1 << bits.Len64(uint64(n)*8/7)
	}
	return mapBase + slots*(kv+1)*3/2
}

// mapBase is what an empty map costs to decode.
const mapBase = 192

// sliceBase and pointerBase are what decoding a typed slice, and a non-nil
// pointer, cost beyond their elements: measured, a []int of one element
// inside a [][]int cost about 140 bytes, a *int64 in a []*int64 24.
const (
	sliceBase   = 128
	pointerBase = 16
)

// msgpackCost walks one msgpack value at data[0:] as decoded into t (nil:
// skipped, costs nothing) and returns its length in bytes and what
// decoding it would allocate. data has passed CheckMsgpack, so lengths are
// within bounds and nesting is bounded; cost stops counting past limit.
//
// With ints set, an integer that t (an integer kind) cannot hold stops the
// walk with errNarrowed: msgpack/v5 would truncate it without an error.
func msgpackCost(data []byte, t reflect.Type, limit int64, ints bool) (n int, cost int64, err error) {
	w := walker{data: data, limit: limit, ints: ints}
	w.value(t, 0)
	return w.p, w.cost, w.err
}

type walker struct {
	data  []byte
	p     int
	cost  int64
	limit int64
	err   error
	ints  bool // refuse integers their type cannot hold (errNarrowed)
}

func (w *walker) charge(n int64) {
	w.cost += n
	if w.cost > w.limit && w.err == nil {
		w.err = errOverBudget
	}
}

var errOverBudget = fmt.Errorf("%w: over the allocation budget", ErrLimit)

func (w *walker) uint(size int) uint64 {
	if w.p+size > len(w.data) {
		w.err = fmt.Errorf("serialize: msgpack: truncated at offset %d", w.p)
		w.p = len(w.data)
		return 0
	}
	var l uint64
	for _, b := range w.data[w.p : w.p+size] {
		l = l<<8 | uint64(b)
	}
	w.p += size
	return l
}

// value walks one value into t; depth guards against a type that nests
// without bound (the input's nesting is already bounded).
func (w *walker) value(t reflect.Type, depth int) {
	if w.err != nil {
		return
	}
	if w.p >= len(w.data) {
		w.err = fmt.Errorf("serialize: msgpack: truncated at offset %d", w.p)
		return
	}
	if depth > 2*MaxDepth {
		w.err = fmt.Errorf("%w: msgpack nesting deeper than %d", ErrLimit, MaxDepth)
		return
	}
	// Pointers allocate their element when the value is not nil.
	for t != nil && t.Kind() == reflect.Pointer {
		if w.data[w.p] == 0xc0 {
			break
		}
		w.charge(int64(t.Elem().Size()) + pointerBase)
		t = t.Elem()
	}
	iface := t != nil && t.Kind() == reflect.Interface
	c := w.data[w.p]
	w.p++
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		if iface && c != 0xc0 {
			w.charge(8)
		}
		if w.ints && (c <= 0x7f || c >= 0xe0) && !fitsInt(t, c, nil) {
			w.err = errNarrowed
		}
	case c >= 0x80 && c <= 0x8f:
		w.mapValue(t, int(c&0x0f), depth)
	case c >= 0x90 && c <= 0x9f:
		w.array(t, int(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		w.bytes(t, int(c&0x1f))
	default:
		switch c {
		case 0xc4, 0xd9:
			w.bytes(t, int(w.uint(1)))
		case 0xc5, 0xda:
			w.bytes(t, int(w.uint(2)))
		case 0xc6, 0xdb:
			w.bytes(t, int(w.uint(4)))
		case 0xc7:
			w.ext(int(w.uint(1)))
		case 0xc8:
			w.ext(int(w.uint(2)))
		case 0xc9:
			w.ext(int(w.uint(4)))
		case 0xca, 0xce, 0xd2, 0xcb, 0xcf, 0xd3, 0xcc, 0xd0, 0xcd, 0xd1:
			w.skip(scalarSize(c))
			if iface {
				w.charge(8)
			}
			if w.ints && c >= 0xcc && w.err == nil && !fitsInt(t, c, w.data[w.p-scalarSize(c):w.p]) {
				w.err = errNarrowed
			}
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
			w.ext(1 << (c - 0xd4))
		case 0xdc:
			w.array(t, int(w.uint(2)), depth)
		case 0xdd:
			w.array(t, int(w.uint(4)), depth)
		case 0xde:
			w.mapValue(t, int(w.uint(2)), depth)
		case 0xdf:
			w.mapValue(t, int(w.uint(4)), depth)
		default:
			w.err = fmt.Errorf("serialize: msgpack: invalid code %#x at offset %d", c, w.p-1)
		}
	}
}

// scalarSize is the payload size of a number code.
func scalarSize(c byte) int {
	switch c {
	case 0xcc, 0xd0:
		return 1
	case 0xcd, 0xd1:
		return 2
	case 0xca, 0xce, 0xd2:
		return 4
	}
	return 8
}

func (w *walker) skip(n int) {
	if n < 0 || w.p+n > len(w.data) {
		w.err = fmt.Errorf("serialize: msgpack: truncated at offset %d", w.p)
		w.p = len(w.data)
		return
	}
	w.p += n
}

// bytes walks a string or binary of n bytes.
func (w *walker) bytes(t reflect.Type, n int) {
	w.skip(n)
	if t == nil {
		return
	}
	w.charge(int64(n))
	if t.Kind() == reflect.Interface {
		w.charge(strSize)
	}
}

// ext walks an extension: a type byte and n bytes of data.
func (w *walker) ext(n int) {
	w.skip(1 + n)
	w.charge(int64(n) + ifaceSize)
}

func (w *walker) array(t reflect.Type, n, depth int) {
	var elem func(i int) reflect.Type
	switch {
	case t == nil:
		elem = func(int) reflect.Type { return nil }
	case t.Kind() == reflect.Slice:
		w.charge(sliceBase + int64(n)*int64(t.Elem().Size()))
		e := t.Elem()
		elem = func(int) reflect.Type { return e }
	case t.Kind() == reflect.Array:
		e := t.Elem()
		elem = func(int) reflect.Type { return e }
	case t.Kind() == reflect.Struct:
		fs := fieldsOf(t)
		elem = func(i int) reflect.Type {
			if i < len(fs.list) {
				return fs.list[i]
			}
			return nil
		}
	default: // interface, or a type the decoder will refuse
		w.charge(int64(n)*ifaceSize + 24 + ifaceSize)
		elem = func(int) reflect.Type { return anyType }
	}
	for i := 0; i < n && w.err == nil; i++ {
		w.value(elem(i), depth+1)
	}
}

func (w *walker) mapValue(t reflect.Type, n, depth int) {
	switch {
	case t == nil:
		for i := 0; i < 2*n && w.err == nil; i++ {
			w.value(nil, depth+1)
		}
	case t.Kind() == reflect.Map:
		k, v := t.Key(), t.Elem()
		w.charge(mapCost(n, int64(k.Size())+int64(v.Size())))
		for i := 0; i < n && w.err == nil; i++ {
			w.value(k, depth+1)
			w.value(v, depth+1)
		}
	case t.Kind() == reflect.Struct:
		fs := fieldsOf(t)
		for i := 0; i < n && w.err == nil; i++ {
			name, ok := w.peekKey()
			if !ok {
				w.value(nil, depth+1)
				w.value(nil, depth+1)
				continue
			}
			w.value(nil, depth+1) // the key: matched in place, not kept
			w.value(fs.byName[string(name)], depth+1)
		}
	default: // interface: map[string]any
		w.charge(mapCost(n, strSize+ifaceSize))
		for i := 0; i < n && w.err == nil; i++ {
			w.value(anyType, depth+1)
			w.value(anyType, depth+1)
		}
	}
}

// peekString returns the string at w.p without moving, if there is one.
func (w *walker) peekString() (string, bool) {
	b, ok := w.peekKey()
	return string(b), ok
}

// peekKey is peekString without a copy: the string's bytes in the input
// (a map index by string(key) copies nothing either).
func (w *walker) peekKey() ([]byte, bool) {
	if w.p >= len(w.data) {
		return nil, false
	}
	c := w.data[w.p]
	start, n := w.p+1, 0
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 && start < len(w.data):
		n, start = int(w.data[start]), start+1
	case c == 0xda && start+1 < len(w.data):
		n, start = int(w.data[start])<<8|int(w.data[start+1]), start+2
	default:
		return nil, false
	}
	if start+n > len(w.data) {
		return nil, false
	}
	return w.data[start : start+n], true
}

// structFields is how msgpack/v5 names the fields of a struct: the
// msgpack tag's name, else the Go field name; embedded structs are
// inlined; "-" is skipped.
type structFields struct {
	list   []reflect.Type // in order, for structs encoded as arrays
	byName map[string]reflect.Type
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*structFields)
	}
	fs := &structFields{byName: map[string]reflect.Type{}}
	addFields(fs, t, 0)
	fieldCache.Store(t, fs)
	return fs
}

func addFields(fs *structFields, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("msgpack")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(fs, et, depth+1)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		fs.list = append(fs.list, ft)
		fs.byName[name] = ft
	}
}

// flatTypes caches whether decoding into a type can allocate more than
// its input (only slices, maps, pointers and interfaces can).
var flatTypes sync.Map // reflect.Type -> bool

func isFlat(t reflect.Type) bool {
	if v, ok := flatTypes.Load(t); ok {
		return v.(bool)
	}
	flat := flatType(t, 0)
	flatTypes.Store(t, flat)
	return flat
}

func flatType(t reflect.Type, depth int) bool {
	if depth > 16 {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		// Not flat either: the walk checks the integer fits (fitsInt).
		return false
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		// []byte costs what its bytes cost.
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
	case reflect.Array:
		return flatType(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if !flatType(t.Field(i).Type, depth+1) {
				return false
			}
		}
	}
	return true
}

// errNarrowed is the walk's error for an integer its Go type cannot hold;
// the decoder turns it into a *TypeError naming where (explain).
var errNarrowed = errors.New("serialize: msgpack: integer out of the range of its Go type")

// fitsInt reports whether the integer of code c (a fixint, or 0xcc-0xd3
// with its payload b) fits t without being truncated, as msgpack/v5's
// reflect SetInt / SetUint would do silently; a negative never fits an
// unsigned kind. Types that are not integer kinds, or that decode
// themselves, take any integer.
func fitsInt(t reflect.Type, c byte, b []byte) bool {
	if t == nil {
		return true
	}
	k := t.Kind()
	signed := k >= reflect.Int && k <= reflect.Int64
	if !signed && (k < reflect.Uint || k > reflect.Uintptr) {
		return true
	}
	var u uint64
	for _, x := range b {
		u = u<<8 | uint64(x)
	}
	var i int64 // the value when it is negative
	switch {
	case c <= 0x7f:
		u = uint64(c)
	case c >= 0xe0:
		i = int64(int8(c))
	case c == 0xd0:
		i = int64(int8(u))
	case c == 0xd1:
		i = int64(int16(u))
	case c == 0xd2:
		i = int64(int32(u))
	case c == 0xd3:
		i = int64(u)
	}
	if i >= 0 && c >= 0xd0 && c <= 0xd3 {
		u, i = uint64(i), 0
	}
	var fits bool
	switch {
	case i < 0:
		fits = signed && !t.OverflowInt(i)
	case signed:
		fits = u <= math.MaxInt64 && !t.OverflowInt(int64(u))
	default:
		fits = !t.OverflowUint(u)
	}
	return fits || decodesItself(t)
}

// intRange names the integers t (an integer kind) holds.
func intRange(t reflect.Type) string {
	if k := t.Kind(); k >= reflect.Int && k <= reflect.Int64 {
		return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(t.Bits()-1), int64(^uint64(0)>>(65-t.Bits())))
	}
	return fmt.Sprintf("an integer from 0 to %d", ^uint64(0)>>(64-t.Bits()))
}
