package dubbo

import (
	"errors"
	"fmt"
	"github.com/minidubbo/minidubbo/internal/peertext"
	"github.com/minidubbo/minidubbo/internal/words"
	"math"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// Response kinds, the first value of a response body. An error is followed
// by its code and message, a value by the value; then come the attachments.
// So the protocol's own values are strings, integers and string maps: a
// serializer needs no type of the framework's.
const (
	kindError = 0
	kindValue = 1
	kindNull  = 2
)

// Bounds on the request head, checked before any argument is decoded.
const (
	maxNameLen = 256
	maxArgs    = 64
)

// request is the decoded head of a request body; the arguments follow in
// dec.
type request struct {
	service, version, group, method string
	timeoutMillis                   int64
	atts                            map[string]string
	argc                            int64
	// borrowed is set by decodeArgs when an argument is a slice of the
	// body (a service.Borrowed the decoder lent): a response may then
	// send bytes of the request (exchange.Request.KeepBody).
	borrowed bool
}

// encodeRequest writes the body of inv: service, version, group, method,
// timeout, attachments, argument count, arguments. The attachments (the
// token among them) come before the arguments so that a provider checks
// them before it decodes any argument. An invocation without a service
// is for the referred URL's service, version and group (u).
// f (may be nil) is the frame enc writes to: a []byte or string argument
// of spliceMin bytes or more is spliced into it (see encodeArg), and it is
// grown once, up front, for the large arguments that are copied.
func encodeRequest(enc serialize.Encoder, f *transport.Buffer, inv *protocol.Invocation, u *protocol.URL, timeout int64, atts map[string]string) error {
	if f != nil {
		// Large copied arguments would grow the frame by doubling, each
		// step a new array and a copy, when the pooled frame is small.
		_, bh := enc.(serialize.BytesHeaderEncoder)
		_, sh := enc.(serialize.StringHeaderEncoder)
		n := 0
		for _, a := range inv.Args {
			switch v := a.(type) {
			case []byte:
				if len(v) < spliceMin || !bh {
					n += len(v)
				}
			case string:
				if len(v) < spliceMin || !sh {
					n += len(v)
				}
			}
		}
		if n >= spliceMin {
			f.Grow(n + 16*len(inv.Args) + 512)
		}
	}
	svc, version, group := inv.Service, inv.Version, inv.Group
	if svc == "" {
		svc, version, group = u.Interface(), u.Version(), u.Group()
	}
	for _, s := range [...]string{svc, version, group, inv.Method} {
		if err := enc.EncodeString(s); err != nil {
			return err
		}
	}
	if err := enc.EncodeInt(timeout); err != nil {
		return err
	}
	if err := enc.EncodeMap(atts); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(len(inv.Args))); err != nil {
		return err
	}

	for i, a := range inv.Args {
		if err := encodeArg(enc, f, a); err != nil {
			return fmt.Errorf("dubbo: encode argument %d of %s.%s: %w", i, svc, inv.Method, err)
		}
	}
	return nil
}

// encodeArg encodes argument v into frame f (may be nil) with enc (which
// writes to f): a []byte or string of spliceMin bytes or more by reference
// (f.Splice) when the encoder can write its header alone, so that the
// request is written to the network from the caller's own memory, not
// copied. The caller's bytes are borrowed until the call returns:
// exchange.Client.Call gives them back however the call ends (see
// there), so a caller may reuse its []byte at once after the call.
func encodeArg(enc serialize.Encoder, f *transport.Buffer, v any) error {
	if f != nil {
		switch x := v.(type) {
		case []byte:
			if len(x) < spliceMin {
				break
			}
			if he, ok := enc.(serialize.BytesHeaderEncoder); ok {
				if err := he.EncodeBytesHeader(len(x)); err != nil {
					return err
				}
				f.Splice(x)
				return nil
			}
		case string:
			if len(x) < spliceMin {
				break
			}
			if he, ok := enc.(serialize.StringHeaderEncoder); ok {
				if err := he.EncodeStringHeader(len(x)); err != nil {
					return err
				}
				// A string never changes: its bytes are read only.
				f.Splice(unsafe.Slice(unsafe.StringData(x), len(x)))
				return nil
			}
		}
	}
	return enc.Encode(v)
}

// decodeRequestHead decodes everything before the arguments, the
// attachments within lim, taking the strings from in when the decoder can
// (in may be nil).
func decodeRequestHead(dec serialize.Decoder, lim serialize.MapLimits, in serialize.Interner) (request, error) {
	var r request
	id, _ := dec.(serialize.InterningDecoder)
	if in == nil {
		id = nil
	}
	for _, p := range [...]*string{&r.service, &r.version, &r.group, &r.method} {
		var s string
		var err error
		if id != nil {
			s, err = id.DecodeStringIntern(in, maxNameLen)
		} else if s, err = dec.DecodeString(); err == nil && len(s) > maxNameLen {
			err = fmt.Errorf("name of %d bytes, limit %d", len(s), maxNameLen)
		}
		if err != nil {
			return r, fmt.Errorf("%w: dubbo: request head: %w", status.ErrBadRequest, err)
		}
		*p = s
	}
	var err error
	if r.timeoutMillis, err = dec.DecodeInt(); err != nil {
		return r, fmt.Errorf("%w: dubbo: request timeout: %w", status.ErrBadRequest, err)
	}
	if id != nil {
		r.atts, err = id.DecodeMapIntern(lim, in)
	} else {
		r.atts, err = dec.DecodeMap(lim)
	}
	if err != nil {
		return r, fmt.Errorf("%w: dubbo: %s.%s attachments: %w", status.ErrBadRequest, r.service, r.method, err)
	}
	if r.argc, err = dec.DecodeInt(); err != nil {
		return r, fmt.Errorf("%w: dubbo: argument count: %w", status.ErrBadRequest, err)
	}
	if r.argc < 0 || r.argc > maxArgs {
		return r, fmt.Errorf("%w: dubbo: %s.%s: %d arguments", status.ErrBadRequest, r.service, r.method, r.argc)
	}
	return r, nil
}

// signature formats method and its parameter types: "SayHello(string, int)".
func signature(method string, types []reflect.Type) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('(')
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.String())
	}
	b.WriteByte(')')
	return b.String()
}

// argSlots is where decodeArgs puts the first arguments of a call, in the
// call's one allocation: the argument list, and the string and []byte
// values the list's interface values point at (see boxAt).
type argSlots struct {
	args  [2]any
	strs  [2]string
	bytes [2][]byte
}

// A []byte result or argument of at least spliceMin bytes is not copied
// into the frame that sends it: it is spliced (transport.Buffer.Splice),
// and writev sends it from its own array. Smaller ones are copied, which
// costs less than another piece for writev.
const spliceMin = 4 << 10

// decodeArgs decodes r.argc arguments into types (plain values when types
// is nil), in slots when it has room for them (slots may be nil).
func decodeArgs(dec serialize.Decoder, r *request, types []reflect.Type, typed bool, slots *argSlots) ([]any, error) {
	if typed && int(r.argc) != len(types) {
		return nil, fmt.Errorf("%w: dubbo: %s.%s takes %s, got %d",
			status.ErrBadRequest, r.service, signature(r.method, types), words.Arguments(len(types)), r.argc)
	}
	if r.argc == 0 {
		return nil, nil
	}
	var args []any
	if slots != nil && int(r.argc) <= len(slots.args) {
		args = slots.args[:r.argc]
	} else {
		args = make([]any, r.argc)
		slots = nil
	}
	for i := range args {
		if !typed || types[i].Kind() == reflect.Interface && types[i].NumMethod() == 0 {
			v, err := dec.DecodeAny()
			if err != nil {
				return nil, argError(r, types, i, err)
			}
			args[i] = v
			continue
		}
		if types[i] == stringType {
			// The commonest argument, without reflect.New and a copy.
			v, err := dec.DecodeString()
			if err != nil {
				return nil, argError(r, types, i, err)
			}
			if slots != nil {
				slots.strs[i] = v
				args[i] = boxAt(&slots.strs[i], stringWord)
			} else {
				args[i] = v
			}
			continue
		}
		if types[i] == borrowedType {
			// The method borrows the bytes: they stay in the request's
			// frame, which the exchange server keeps until the method has
			// returned and, as r.borrowed asks, a response that splices
			// them is written.
			v, lent, err := decodeBorrowed(dec)
			if err != nil {
				return nil, argError(r, types, i, err)
			}
			r.borrowed = r.borrowed || lent
			if slots != nil {
				slots.bytes[i] = v
				args[i] = boxAt(&slots.bytes[i], borrowedWord)
			} else {
				args[i] = service.Borrowed(v)
			}
			continue
		}
		if bd, ok := dec.(serialize.BytesDecoder); ok && types[i] == bytesType {
			v, err := bd.DecodeBytes()
			if err != nil {
				return nil, argError(r, types, i, err)
			}
			if slots != nil {
				slots.bytes[i] = v
				args[i] = boxAt(&slots.bytes[i], bytesWord)
			} else {
				args[i] = v
			}
			continue
		}
		p := reflect.New(types[i])
		if err := dec.Decode(p.Interface()); err != nil {
			return nil, argError(r, types, i, err)
		}
		args[i] = p.Elem().Interface()
	}
	return args, nil
}

// decodeBorrowed decodes a service.Borrowed argument: a slice of the body
// when the decoder can lend one (lent), else a copy (as for a []byte).
func decodeBorrowed(dec serialize.Decoder) ([]byte, bool, error) {
	switch d := dec.(type) {
	case serialize.BorrowingDecoder:
		b, err := d.DecodeBytesBorrowed()
		return b, len(b) > 0, err
	case serialize.BytesDecoder:
		b, err := d.DecodeBytes()
		return b, false, err
	}
	var b []byte // escapes: only here
	err := dec.Decode(&b)
	return b, false, err
}

// eface is the layout of an interface value with no methods.
type eface struct {
	typ, data unsafe.Pointer
}

// typeWordOf returns the type word of interface values holding a T.
func typeWordOf[T any]() unsafe.Pointer {
	var v any = *new(T)
	return (*eface)(unsafe.Pointer(&v)).typ
}

var (
	stringWord   = typeWordOf[string]()
	bytesWord    = typeWordOf[[]byte]()
	borrowedWord = typeWordOf[service.Borrowed]()
)

// boxAt returns an interface value holding *p (of the type whose type word
// is t: p's element type) without copying it: its data word is p. This is
// what any(*p) would be, but for the allocation of the copy; so *p must
// never change afterwards. p escapes as if boxed itself.
func boxAt[T any](p *T, t unsafe.Pointer) any {
	v := any(p)
	(*eface)(unsafe.Pointer(&v)).typ = t
	return v
}

var (
	stringType   = reflect.TypeFor[string]()
	bytesType    = reflect.TypeFor[[]byte]()
	borrowedType = reflect.TypeFor[service.Borrowed]()
)

func argError(r *request, types []reflect.Type, i int, err error) error {
	if types == nil {
		return fmt.Errorf("%w: dubbo: %s.%s argument %d: %w", status.ErrBadRequest, r.service, r.method, i, err)
	}
	return fmt.Errorf("%w: dubbo: %s.%s argument %d (%s): %w",
		status.ErrBadRequest, r.service, signature(r.method, types), i, types[i], err)
}

// encodeResponse writes the outcome of a call as a response frame.
func encodeResponse(ser serialize.Serializer, res *protocol.Result, callErr error) (*transport.Buffer, error) {
	f := exchange.NewFrame()
	enc := ser.NewEncoder(f)
	defer enc.Release()
	var atts map[string]string
	if res != nil {
		atts = res.Attachments
	}
	var err error
	switch {
	case callErr != nil:
		se := service.FromError(callErr)
		if err = enc.EncodeInt(kindError); err == nil {
			if err = enc.EncodeInt(int64(se.Code)); err == nil {
				err = enc.EncodeString(se.Message)
			}
		}
	case res == nil || res.Value == nil:
		err = enc.EncodeInt(kindNull)
	default:
		if err = enc.EncodeInt(kindValue); err == nil {
			err = encodeValue(enc, f, res.Value)
		}
	}
	if err == nil {
		err = enc.EncodeMap(atts)
	}
	if err != nil {
		f.Release()
		return nil, fmt.Errorf("%w: dubbo: encode response: %w", status.ErrServerError, err)
	}
	return f, nil
}

// encodeValue encodes v into frame f with enc (which writes to f): a
// []byte of spliceMin bytes or more by reference (f.Splice) when the
// encoder can write its header alone, so that it is written to the network
// from its own array, not copied.
func encodeValue(enc serialize.Encoder, f *transport.Buffer, v any) error {
	if b, ok := v.([]byte); ok && len(b) >= spliceMin {
		if he, ok := enc.(serialize.BytesHeaderEncoder); ok {
			if err := he.EncodeBytesHeader(len(b)); err != nil {
				return err
			}
			f.Splice(b)
			return nil
		}
	}
	return enc.Encode(v)
}

// decodeResponse decodes a response body into a Result (and inv.Reply), or
// the remote business error; its attachments are read within lim.
func decodeResponse(ser serialize.Serializer, body []byte, inv *protocol.Invocation, lim serialize.MapLimits) (*protocol.Result, error) {
	dec, err := ser.NewDecoder(body)
	if err != nil {
		return nil, fmt.Errorf("%w: dubbo: %s.%s: %w", status.ErrBadResponse, inv.Service, inv.Method, err)
	}
	defer dec.Release()
	kind, err := dec.DecodeInt()
	if err != nil {
		return nil, fmt.Errorf("%w: dubbo: %s.%s: %w", status.ErrBadResponse, inv.Service, inv.Method, err)
	}
	res := inv.NewResult()
	switch kind {
	case kindError:
		code, err := dec.DecodeInt()
		var msg string
		if err == nil {
			msg, err = dec.DecodeString()
		}
		if err == nil && (code < math.MinInt32 || code > math.MaxInt32) {
			err = fmt.Errorf("code %d out of range", code)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: dubbo: %s.%s error: %w", status.ErrBadResponse, inv.Service, inv.Method, err)
		}
		// The provider's text, as a status answer's message is
		// (exchange.MaxStatusMessage): bounded, no control characters.
		msg = peertext.String(msg, exchange.MaxStatusMessage)
		return nil, &service.Error{Code: service.Code(code), Message: msg, Remote: true}
	case kindValue:
		switch r := inv.Reply.(type) {
		case nil:
			res.Value, err = dec.DecodeAny()
		case *any:
			*r, err = dec.DecodeAny()
			res.Value = r
		default:
			err = dec.Decode(r)
			res.Value = r
		}
	case kindNull:
		if inv.Reply != nil {
			res.Value = inv.Reply
		}
	default:
		err = fmt.Errorf("unknown response kind %d", kind)
	}
	if err == nil {
		if res.Attachments, err = dec.DecodeMap(lim); err != nil {
			err = fmt.Errorf("attachments: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dubbo: %s.%s: %w", status.ErrBadResponse, inv.Service, inv.Method, err)
	}
	return res, nil
}

// isStatusError reports whether an invoker's error is an answer of the
// protocol (unknown method, bad arguments) rather than a business error.
func isStatusError(err error) bool {
	var se *service.Error
	if errors.As(err, &se) {
		return false
	}
	var st *status.Error
	if errors.As(err, &st) {
		return true
	}
	// Limits a provider-side filter enforces (executes) answer "busy", which
	// consumers may retry elsewhere, rather than a business error.
	return errors.Is(err, status.ErrServiceNotFound) || errors.Is(err, status.ErrBadRequest) ||
		errors.Is(err, status.ErrServerBusy)
}

// callDeadline is when the provider stops working on a call: the
// request's timeout, capped by max (a request without one gets max),
// counted from when the request was read (received), so that the time it
// waited in the provider's queue counts, as it does for the consumer.
func callDeadline(received time.Time, r *request, max time.Duration) time.Time {
	d := max
	if r.timeoutMillis > 0 && r.timeoutMillis < max.Milliseconds() {
		d = time.Duration(r.timeoutMillis) * time.Millisecond
	}
	if received.IsZero() {
		received = time.Now()
	}
	return received.Add(d)
}
