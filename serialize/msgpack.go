package serialize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// NewMsgpack returns the msgpack serializer (github.com/vmihailenco/msgpack/v5),
// named Msgpack with id MsgpackID. Before decoding, it scans the bytes with
// CheckMsgpack, and bounds what decoding allocates with the default
// Limits.
func NewMsgpack() Serializer { return msgpackSerializer{lim: Limits{}.withDefaults()} }

// NewMsgpackLimits returns the msgpack serializer with allocation limits
// l (zero fields: the defaults).
func NewMsgpackLimits(l Limits) Serializer { return msgpackSerializer{lim: l.withDefaults()} }

type msgpackSerializer struct{ lim Limits }

func (msgpackSerializer) Name() string { return Msgpack }
func (msgpackSerializer) ID() byte     { return MsgpackID }

func (msgpackSerializer) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := getMsgpackEncoder(&b)
	defer e.Release()
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (s msgpackSerializer) Unmarshal(data []byte, v any) error {
	d, err := s.NewDecoder(data)
	if err != nil {
		return err
	}
	defer d.Release()
	return d.Decode(v)
}

func (msgpackSerializer) NewEncoder(w io.Writer) Encoder { return getMsgpackEncoder(w) }

func (s msgpackSerializer) NewDecoder(data []byte) (Decoder, error) {
	if err := CheckMsgpack(data); err != nil {
		return nil, err
	}
	d := msgpackDecoders.Get().(*msgpackDecoder)
	d.data = data
	d.budget = s.lim.budget(len(data))
	d.limit = d.budget
	d.r.Reset(data)
	d.d.ResetReader(&d.r)
	d.d.DisallowUnknownFields(!s.lim.AllowUnknownFields)
	return d, nil
}

var msgpackEncoders = sync.Pool{New: func() any {
	e := msgpack.NewEncoder(nil)
	e.UseCompactInts(true)
	return &msgpackEncoder{e: e}
}}

func getMsgpackEncoder(w io.Writer) *msgpackEncoder {
	e := msgpackEncoders.Get().(*msgpackEncoder)
	e.e.ResetWriter(w)
	return e
}

type msgpackEncoder struct{ e *msgpack.Encoder }

func (e *msgpackEncoder) Encode(v any) error {
	switch x := v.(type) {
	case string:
		return e.e.EncodeString(x)
	case nil:
		return e.e.EncodeNil()
	}
	return e.e.Encode(v)
}
func (e *msgpackEncoder) EncodeString(s string) error { return e.e.EncodeString(s) }

// EncodeBytesHeader implements BytesHeaderEncoder.
func (e *msgpackEncoder) EncodeBytesHeader(n int) error { return e.e.EncodeBytesLen(n) }
func (e *msgpackEncoder) EncodeInt(n int64) error       { return e.e.EncodeInt(n) }

// EncodeStringHeader implements StringHeaderEncoder: the str header that
// msgpack's EncodeString writes (the encoder has no dictionary here).
func (e *msgpackEncoder) EncodeStringHeader(n int) error {
	var h [5]byte
	k := 1
	switch {
	case n < 32:
		h[0] = msgpcode.FixedStrLow | byte(n)
	case n < 256:
		h[0], h[1], k = msgpcode.Str8, byte(n), 2
	case n <= math.MaxUint16:
		h[0], k = msgpcode.Str16, 3
		binary.BigEndian.PutUint16(h[1:], uint16(n))
	case uint64(n) <= math.MaxUint32:
		h[0], k = msgpcode.Str32, 5
		binary.BigEndian.PutUint32(h[1:], uint32(n))
	default:
		return fmt.Errorf("msgpack: string of %d bytes", n)
	}
	w := e.e.Writer()
	if bw, ok := w.(io.ByteWriter); ok {
		// Byte by byte: h passed to Write would escape, an allocation.
		for _, c := range h[:k] {
			if err := bw.WriteByte(c); err != nil {
				return err
			}
		}
		return nil
	}
	return writeHeader(w, h, k)
}

// writeHeader writes h[:k] to w (h escapes here, not in the caller).
func writeHeader(w io.Writer, h [5]byte, k int) error {
	_, err := w.Write(h[:k])
	return err
}

func (e *msgpackEncoder) EncodeMap(m map[string]string) error {
	if err := e.e.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for k, v := range m {
		if err := e.e.EncodeString(k); err != nil {
			return err
		}
		if err := e.e.EncodeString(v); err != nil {
			return err
		}
	}
	return nil
}

func (e *msgpackEncoder) Release() {
	e.e.ResetWriter(nil)
	msgpackEncoders.Put(e)
}

var (
	_ InterningDecoder    = (*msgpackDecoder)(nil)
	_ BytesDecoder        = (*msgpackDecoder)(nil)
	_ BorrowingDecoder    = (*msgpackDecoder)(nil)
	_ BytesHeaderEncoder  = (*msgpackEncoder)(nil)
	_ StringHeaderEncoder = (*msgpackEncoder)(nil)
)

var msgpackDecoders = sync.Pool{New: func() any {
	d := &msgpackDecoder{d: msgpack.NewDecoder(nil)}
	d.d.UseLooseInterfaceDecoding(true)
	return d
}}

type msgpackDecoder struct {
	d      *msgpack.Decoder
	r      bytes.Reader
	data   []byte
	budget int64 // allocation left for the values still to decode
	limit  int64 // the whole body's allocation budget, for messages
}

// spend walks the next value as decoded into t and takes what it would
// allocate from the budget, or fails without decoding it.
func (d *msgpackDecoder) spend(t reflect.Type) error {
	if isFlat(t) {
		return nil
	}
	pos := len(d.data) - d.r.Len()
	if pos < 0 || pos >= len(d.data) {
		return nil // the decoder reports the end of input
	}
	_, cost, err := msgpackCost(d.data[pos:], t, d.budget, true)
	if err == errNarrowed {
		// Named with its path when the kind check finds it too; else (a
		// type that decodes itself on the way) the decoder decides.
		var te *TypeError
		if err = explain(d.data, pos, t, err); errors.As(err, &te) {
			return err
		}
		_, cost, err = msgpackCost(d.data[pos:], t, d.budget, false)
	}
	if err == errOverBudget {
		return fmt.Errorf("%w: decoding %d bytes into %v would allocate more than the %d bytes allowed for a body of %d bytes",
			ErrLimit, len(d.data)-pos, t, d.limit, len(d.data))
	}
	if err != nil {
		return err
	}
	d.budget -= cost
	return nil
}

func (d *msgpackDecoder) Decode(v any) (err error) {
	defer recoverDecode(&err)
	switch p := v.(type) {
	case *string:
		if p != nil {
			*p, err = d.DecodeString()
			return err
		}
	case *[]byte:
		if p != nil {
			start := d.pos()
			b, err := d.decodeBytesInto(*p)
			if err != nil {
				return explain(d.data, start, bytesType, err)
			}
			*p = b
			return nil
		}
	}
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		if err := d.spend(t.Elem()); err != nil {
			return err
		}
	}
	start := d.pos()
	if err := d.d.Decode(v); err != nil {
		if t != nil && t.Kind() == reflect.Pointer {
			return explain(d.data, start, t.Elem(), err)
		}
		return err
	}
	return nil
}

// pos is the offset in the body of the next value.
func (d *msgpackDecoder) pos() int { return len(d.data) - d.r.Len() }

var (
	stringType = reflect.TypeFor[string]()
	bytesType  = reflect.TypeFor[[]byte]()
	int64Type  = reflect.TypeFor[int64]()
	mapSSType  = reflect.TypeFor[map[string]string]()
)

func (d *msgpackDecoder) DecodeAny() (v any, err error) {
	defer recoverDecode(&err)
	if err := d.spend(anyType); err != nil {
		return nil, err
	}
	v, err = d.d.DecodeInterfaceLoose()
	return signed(v), err
}

// signed turns the unsigned integers of v that fit in an int64 into int64,
// so that a Go int reads back as int64 whichever msgpack code carried it.
func signed(v any) any {
	switch x := v.(type) {
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
	case []any:
		for i, e := range x {
			x[i] = signed(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = signed(e)
		}
	case map[any]any:
		for k, e := range x {
			x[k] = signed(e)
		}
	}
	return v
}

// DecodeString copies the string's bytes once, from the body (msgpack's
// own DecodeString copies them into its buffer first).
func (d *msgpackDecoder) DecodeString() (string, error) {
	start := d.pos()
	b, err := d.stringBytes()
	if err != nil {
		return "", explain(d.data, start, stringType, err)
	}
	return string(b), nil
}

// DecodeBytes implements BytesDecoder: nil for msgpack's nil, a copy of
// the bytes of a bin or str value otherwise, as decoding into a *[]byte
// gives.
func (d *msgpackDecoder) DecodeBytes() ([]byte, error) {
	start := d.pos()
	b, err := d.decodeBytesInto(nil)
	if err != nil {
		return nil, explain(d.data, start, bytesType, err)
	}
	return b, nil
}

// DecodeBytesBorrowed implements BorrowingDecoder: the bytes of a bin or
// str value as a slice of the body, nil for msgpack's nil.
func (d *msgpackDecoder) DecodeBytesBorrowed() ([]byte, error) {
	start := d.pos()
	src, _, err := d.nextBytes()
	if err != nil {
		return nil, explain(d.data, start, bytesType, err)
	}
	return src, nil
}

// nextBytes reads the next value as a bin or str and gives its bytes as a
// slice of the input (isNil for msgpack's nil), having moved past them.
// The length is checked against what is left of the input before use.
func (d *msgpackDecoder) nextBytes() (src []byte, isNil bool, err error) {
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return nil, false, err
	}
	if n < 0 {
		return nil, true, nil
	}
	pos := len(d.data) - d.r.Len()
	if pos < 0 || n > len(d.data)-pos {
		return nil, false, io.ErrUnexpectedEOF
	}
	if _, err := d.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, false, err
	}
	return d.data[pos : pos+n : pos+n], false, nil
}

// decodeBytesInto is decoding into a *[]byte that holds b, as msgpack does
// it (nil for msgpack's nil, b's array reused when it has room, else a new
// one), with one copy from the body: msgpack's own zeroes a new slice and
// then reads into it through an io.Reader. At 16 KiB that zeroing was a
// tenth of the consumer's CPU, the reply being new memory.
func (d *msgpackDecoder) decodeBytesInto(b []byte) ([]byte, error) {
	src, isNil, err := d.nextBytes()
	if err != nil || isNil {
		return nil, err
	}
	n := len(src)
	switch {
	case n <= cap(b):
		if b == nil {
			b = []byte{}
		}
		b = b[:n]
		copy(b, src)
	default:
		// make and copy together are compiled into one allocation that
		// is not zeroed (bytes.Clone's append clears the size class's
		// tail first: a cold cache line touched for nothing).
		b = make([]byte, n)
		copy(b, src)
	}
	return b, nil
}

func (d *msgpackDecoder) DecodeInt() (int64, error) {
	start := d.pos()
	n, err := d.d.DecodeInt64()
	if err != nil {
		return 0, explain(d.data, start, int64Type, err)
	}
	return n, nil
}

func (d *msgpackDecoder) DecodeMap(l MapLimits) (map[string]string, error) {
	return d.DecodeMapIntern(l, copying{})
}

// copying is the Interner that interns nothing: each string is a copy.
type copying struct{}

func (copying) Intern(b []byte, _ string) string { return string(b) }

// stringBytes reads the next value as a string (nil reads as "") and
// returns its bytes in place, without copying them.
func (d *msgpackDecoder) stringBytes() ([]byte, error) {
	n, err := d.d.DecodeBytesLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	pos := len(d.data) - d.r.Len()
	if pos < 0 || n > len(d.data)-pos {
		return nil, io.ErrUnexpectedEOF
	}
	if _, err := d.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, err
	}
	return d.data[pos : pos+n : pos+n], nil
}

func (d *msgpackDecoder) DecodeStringIntern(in Interner, max int) (string, error) {
	start := d.pos()
	b, err := d.stringBytes()
	if err != nil {
		return "", explain(d.data, start, stringType, err)
	}
	if max > 0 && len(b) > max {
		return "", fmt.Errorf("%w: string of %d bytes, limit %d", ErrLimit, len(b), max)
	}
	return in.Intern(b, ""), nil
}

// maxKeptMap is the most entries of a map that DecodeMapIntern offers to
// a MapInterner.
const maxKeptMap = 4

func (d *msgpackDecoder) DecodeMapIntern(l MapLimits, in Interner) (map[string]string, error) {
	start := d.pos()
	m, err := d.decodeMapIntern(l, in, start)
	if err != nil {
		return nil, explain(d.data, start, mapSSType, err)
	}
	return m, nil
}

func (d *msgpackDecoder) decodeMapIntern(l MapLimits, in Interner, start int) (map[string]string, error) {
	n, err := d.d.DecodeMapLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	l = l.withDefaults()
	if err := l.checkEntries(n); err != nil {
		return nil, err
	}
	if mi, ok := in.(MapInterner); ok && n <= maxKeptMap {
		return d.decodeMapKept(l, mi, n, start)
	}
	// Grown as entries arrive: the declared count is not trusted for size.
	m := make(map[string]string, min(n, 8))
	total := 0
	for i := range n {
		kb, vb, err := d.entry(l, i, &total)
		if err != nil {
			return nil, err
		}
		k := in.Intern(kb, "")
		m[k] = in.Intern(vb, k)
	}
	return m, nil
}

// entry reads the key and value of a map's entry i in place, adds their
// sizes to *total and checks them against l.
func (d *msgpackDecoder) entry(l MapLimits, i int, total *int) (kb, vb []byte, err error) {
	if kb, err = d.stringBytes(); err != nil {
		return nil, nil, err
	}
	if vb, err = d.stringBytes(); err != nil {
		return nil, nil, err
	}
	*total += len(kb) + len(vb)
	if err := l.checkBytes(i+1, *total, kb, vb); err != nil {
		return nil, nil, err
	}
	return kb, vb, nil
}

// decodeMapKept decodes a map of n entries, from start in the body, with
// the map in keeps for the same bytes if it has one: the entries are read
// in place (and checked against l) before anything is allocated.
func (d *msgpackDecoder) decodeMapKept(l MapLimits, in MapInterner, n, start int) (map[string]string, error) {
	var kv [2 * maxKeptMap][]byte
	total := 0
	for i := range n {
		kb, vb, err := d.entry(l, i, &total)
		if err != nil {
			return nil, err
		}
		kv[2*i], kv[2*i+1] = kb, vb
	}
	enc := d.data[start : len(d.data)-d.r.Len()]
	if m := in.InternMap(enc); m != nil {
		return m, nil
	}
	m := make(map[string]string, n)
	for i := range n {
		k := in.Intern(kv[2*i], "")
		m[k] = in.Intern(kv[2*i+1], k)
	}
	in.KeepMap(enc, m)
	return m, nil
}

func (d *msgpackDecoder) Release() {
	d.data = nil
	d.r.Reset(nil)
	d.d.ResetReader(&d.r)
	msgpackDecoders.Put(d)
}

func recoverDecode(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("serialize: decode: %v", r)
	}
}

// CheckMsgpack scans data, a sequence of msgpack values, without
// allocating, and returns an error wrapping ErrLimit if arrays and maps
// nest deeper than MaxDepth or any declared length (of an array, map,
// string, binary or extension) exceeds the bytes left, or an error if data
// is truncated or holds the unused code 0xc1.
func CheckMsgpack(data []byte) error {
	var stack [MaxDepth]uint64 // values still expected in each open container
	depth := 0
	p := 0
	for p < len(data) {
		c := data[p]
		p++
		var n uint64     // payload bytes that follow the header
		var elems uint64 // child values, for arrays and maps
		container := false
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			elems, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f:
			elems, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			n = uint64(c & 0x1f)
		default:
			var size int // bytes of the length field
			switch c {
			case 0xc1:
				return fmt.Errorf("serialize: msgpack: invalid code 0xc1 at offset %d", p-1)
			case 0xc4, 0xd9:
				size = 1
			case 0xc5, 0xda:
				size = 2
			case 0xc6, 0xdb:
				size = 4
			case 0xc7:
				size, n = 1, 1
			case 0xc8:
				size, n = 2, 1
			case 0xc9:
				size, n = 4, 1
			case 0xca, 0xce, 0xd2:
				n = 4
			case 0xcb, 0xcf, 0xd3:
				n = 8
			case 0xcc, 0xd0:
				n = 1
			case 0xcd, 0xd1:
				n = 2
			case 0xd4:
				n = 2
			case 0xd5:
				n = 3
			case 0xd6:
				n = 5
			case 0xd7:
				n = 9
			case 0xd8:
				n = 17
			case 0xdc:
				size, container = 2, true
			case 0xdd:
				size, container = 4, true
			case 0xde:
				size, container = 2, true
			case 0xdf:
				size, container = 4, true
			}
			if size > 0 {
				if len(data)-p < size {
					return fmt.Errorf("serialize: msgpack: truncated at offset %d", p-1)
				}
				var l uint64
				for _, b := range data[p : p+size] {
					l = l<<8 | uint64(b)
				}
				p += size
				switch {
				case c == 0xde || c == 0xdf:
					elems = 2 * l
				case container:
					elems = l
				default:
					n += l
				}
			}
		}
		left := uint64(len(data) - p)
		if n > left {
			return fmt.Errorf("%w: msgpack value at offset %d declares %d bytes, %d left", ErrLimit, p-1, n, left)
		}
		p += int(n)
		if container && elems > 0 {
			if elems > left {
				return fmt.Errorf("%w: msgpack container at offset %d declares %d values, %d bytes left", ErrLimit, p-1, elems, left)
			}
			if depth == MaxDepth {
				return fmt.Errorf("%w: msgpack nesting deeper than %d", ErrLimit, MaxDepth)
			}
			stack[depth] = elems
			depth++
			continue
		}
		// One value complete: close every container it completes.
		for depth > 0 {
			stack[depth-1]--
			if stack[depth-1] > 0 {
				break
			}
			depth--
		}
	}
	if depth > 0 {
		return fmt.Errorf("serialize: msgpack: truncated (%d containers open)", depth)
	}
	return nil
}
