package serialize

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Names and header ids of the built-in serializers. The ids are Dubbo's.
const (
	Msgpack   = "msgpack"
	JSON      = "json"
	MsgpackID = 27
	JSONID    = 16
)

// MaxDepth is the deepest nesting of arrays and maps that decoding accepts.
const MaxDepth = 64

// ErrLimit is wrapped by decoding errors for input that breaks a limit: too
// deep, or declaring more elements or bytes than it holds.
var ErrLimit = errors.New("serialize: input exceeds decoding limits")

// Serializer encodes and decodes values. protocol/dubbo calls it;
// msgpack and json implement it; users may add their own to a Table,
// most simply with Stream. Implementations must be safe for concurrent use.
//
// Decoding must be safe on untrusted bytes: Unmarshal and NewDecoder reject
// input whose nesting is deeper than MaxDepth or whose declared lengths
// exceed what it holds, so that no input makes the decoder allocate far
// more than its own size or overflow the stack.
type Serializer interface {
	// Name is the name used in URLs (serialization=msgpack).
	Name() string
	// ID is the id carried in the low 5 bits of the header's flag byte.
	ID() byte
	// Marshal encodes one value.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes one value into v, a non-nil pointer.
	Unmarshal(data []byte, v any) error
	// NewEncoder returns an encoder that writes a sequence of values to w.
	// The caller must Release it when done.
	NewEncoder(w io.Writer) Encoder
	// NewDecoder checks data against the decoding limits and returns a
	// decoder of the sequence of values in it, which reads data in place.
	// The caller must Release it when done.
	NewDecoder(data []byte) (Decoder, error)
}

// Encoder writes a sequence of values. It is not safe for concurrent use.
type Encoder interface {
	// Encode writes any value.
	Encode(v any) error
	// EncodeString writes a string without boxing it.
	EncodeString(s string) error
	// EncodeInt writes an integer without boxing it.
	EncodeInt(n int64) error
	// EncodeMap writes a string map; nil and empty maps are written alike.
	EncodeMap(m map[string]string) error
	// Release returns the encoder to its pool; it must not be used after.
	Release()
}

// Decoder reads a sequence of values. It is not safe for concurrent use.
type Decoder interface {
	// Decode reads the next value into v, a non-nil pointer.
	Decode(v any) error
	// DecodeAny reads the next value as plain Go values: nil, bool,
	// int64 (uint64 above math.MaxInt64), float64, string, []byte, []any,
	// map[string]any. The json serializer gives numbers as float64.
	DecodeAny() (any, error)
	// DecodeString reads the next value as a string.
	DecodeString() (string, error)
	// DecodeInt reads the next value as an integer.
	DecodeInt() (int64, error)
	// DecodeMap reads the next value as a string map (nil when empty),
	// within l (a zero field is its default, see MapLimits): a map over a
	// limit is an error wrapping ErrLimit, found before the map grows past
	// it.
	DecodeMap(l MapLimits) (map[string]string, error)
	// Release returns the decoder to its pool; it must not be used after.
	Release()
}

// Interner gives the string equal to b, one it already holds when it can,
// so that decoding a string that repeats on every call (a service or method
// name, an attachment's key) allocates nothing. b is valid only during the
// call; key is the map key when b is a map value, "" otherwise.
type Interner interface {
	Intern(b []byte, key string) string
}

// MapInterner is an Interner that also keeps whole string maps, so that a
// map whose encoding repeats that of an earlier one (a call's attachments
// that name only the calling application) is decoded without allocating
// anything. A map it gives is shared between the decodings that return
// it: nobody may modify it. Implementations must be safe for concurrent
// use.
type MapInterner interface {
	Interner
	// InternMap returns the map it keeps for enc, the encoding of a whole
	// map (valid only during the call), or nil.
	InternMap(enc []byte) map[string]string
	// KeepMap offers m, just decoded from enc (valid only during the
	// call), for the next decodings of enc. The interner may keep it; m
	// is then shared and must not be modified.
	KeepMap(enc []byte, m map[string]string)
}

// InterningDecoder is implemented by decoders that can take strings from
// an Interner instead of allocating them (msgpack's). Callers fall back to
// DecodeString and DecodeMap for decoders without it.
type InterningDecoder interface {
	// DecodeStringIntern is DecodeString with the string from in. When
	// max > 0, a string longer than max bytes is an error wrapping
	// ErrLimit, found before anything is allocated for it.
	DecodeStringIntern(in Interner, max int) (string, error)
	// DecodeMapIntern is DecodeMap with the keys and values from in. When
	// in is a MapInterner, the map may be one it keeps, which must not be
	// modified.
	DecodeMapIntern(l MapLimits, in Interner) (map[string]string, error)
}

// BytesDecoder is implemented by decoders that read a []byte without
// reflection (msgpack's). Callers fall back to Decode with a *[]byte.
type BytesDecoder interface {
	// DecodeBytes reads the next value as a []byte, as Decode into a
	// *[]byte would, and returns a copy the caller owns.
	DecodeBytes() ([]byte, error)
}

// BorrowingDecoder is implemented by decoders that can give a []byte
// value as the bytes of their input, not a copy (msgpack's): for a
// caller that reads the value only while the input stays untouched
// (protocol/dubbo's service.Borrowed arguments). Callers fall back to a
// copy (BytesDecoder, or Decode with a *[]byte).
type BorrowingDecoder interface {
	// DecodeBytesBorrowed reads the next value as DecodeBytes does but
	// returns a slice of the decoder's input (its capacity ends with the
	// value), nil for a nil value. It is valid as long as the input is
	// and must not be modified.
	DecodeBytesBorrowed() ([]byte, error)
}

// BytesHeaderEncoder is implemented by encoders that can write a []byte
// value's header alone (msgpack's): the caller then writes the n bytes
// themselves to the same output, before anything else, as a frame that
// refers to them rather than copying them does (transport.Buffer.Splice).
type BytesHeaderEncoder interface {
	// EncodeBytesHeader writes the header of a byte string of n bytes
	// (n >= 0), as Encode of a non-nil []byte of that length writes it.
	EncodeBytesHeader(n int) error
}

// StringHeaderEncoder is BytesHeaderEncoder for strings (msgpack's): the
// caller writes the string's n bytes themselves right after the header.
type StringHeaderEncoder interface {
	// EncodeStringHeader writes the header of a string of n bytes
	// (n >= 0), as Encode of such a string writes it.
	EncodeStringHeader(n int) error
}

// Table maps names and ids to serializers. It is safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	byName map[string]Serializer
	// byID is replaced whole (under mu) by Register, so that ByID, which
	// a provider calls for every request, reads it without a lock: a read
	// lock writes its shared count, and the cache line moves between the
	// cores at every request.
	byID atomic.Pointer[[32]Serializer]
}

// Builtin returns a new Table holding msgpack and json.
func Builtin() *Table { return BuiltinLimits(Limits{}) }

// BuiltinLimits returns a new Table holding msgpack and json, with
// allocation limits l for msgpack (zero fields: the defaults) and
// l.AllowUnknownFields for both.
func BuiltinLimits(l Limits) *Table {
	t := &Table{byName: map[string]Serializer{}}
	var ids [32]Serializer
	for _, s := range []Serializer{NewMsgpackLimits(l), NewJSONLimits(l)} {
		t.byName[s.Name()] = s
		ids[s.ID()] = s
	}
	t.byID.Store(&ids)
	return t
}

// Register adds s. It is an error if the name is empty or taken, or the id
// is not below 32 or taken.
func (t *Table) Register(s Serializer) error {
	if s == nil || s.Name() == "" {
		return errors.New("serialize: register: empty name")
	}
	if s.ID() >= 32 {
		return fmt.Errorf("serialize: register %q: id %d does not fit in 5 bits", s.Name(), s.ID())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName == nil {
		t.byName = map[string]Serializer{}
	}
	if _, ok := t.byName[s.Name()]; ok {
		return fmt.Errorf("serialize: register %q: name taken", s.Name())
	}
	var ids [32]Serializer
	if old := t.byID.Load(); old != nil {
		ids = *old
	}
	if o := ids[s.ID()]; o != nil {
		return fmt.Errorf("serialize: register %q: id %d taken by %q", s.Name(), s.ID(), o.Name())
	}
	t.byName[s.Name()] = s
	ids[s.ID()] = s
	t.byID.Store(&ids)
	return nil
}

// Get returns the serializer called name. An unknown name is an error that
// lists the known ones.
func (t *Table) Get(name string) (Serializer, error) {
	t.mu.RLock()
	s, ok := t.byName[name]
	t.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("serialize: unknown serialization %q (known: %s)", name, strings.Join(t.Names(), ", "))
	}
	return s, nil
}

// ByID returns the serializer with header id id. An unknown id is an error
// that lists the known ones.
func (t *Table) ByID(id byte) (Serializer, error) {
	var s Serializer
	ids := t.byID.Load()
	if ids != nil && id < 32 {
		s = ids[id]
	}
	if s == nil {
		var known []string
		if ids != nil {
			for i, k := range ids {
				if k != nil {
					known = append(known, fmt.Sprintf("%d=%s", i, k.Name()))
				}
			}
		}
		return nil, fmt.Errorf("serialize: unknown serialization id %d (known: %s)", id, strings.Join(known, ", "))
	}
	return s, nil
}

// Names returns the known names, sorted.
func (t *Table) Names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := make([]string, 0, len(t.byName))
	for n := range t.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
