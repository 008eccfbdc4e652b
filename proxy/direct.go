package proxy

import (
	"context"
	"reflect"
	"unsafe"

	"github.com/minidubbo/minidubbo/internal/eface"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// A stub field of a common shape (at most one argument after the context,
// argument and reply each a string, a slice, a pointer, a map, a bool, a
// float64 or an integer of 32 or 64 bits) is filled with a plain Go func
// instead of reflect.MakeFunc's: reflect.MakeFunc copies every argument
// into memory of its own and passes them in a new slice, and its results
// back out, which cost 3 of a call's allocations and most of the stub's
// CPU. The func is declared with the argument's and the reply's machine
// shape (unsafe.Pointer for every pointer and map type, []byte for every
// slice type, int64 for every 64-bit integer type (int too on a 64-bit
// platform, int32 on a 32-bit one), and so on), which is
// passed and returned in the same registers as the field's own types, and
// it is stored into the field as a func value of the field's type. The
// interface values it gives the invoker (the argument, the Reply pointer)
// carry the field's own types, so the invoker sees exactly what the
// reflective stub gives it.

// Shapes of an argument or a reply that a direct stub handles.
const (
	shapeNone    = iota // no argument, or an error-only method
	shapeString         // any string type
	shapeSlice          // any slice type: three words
	shapeWord           // any pointer or map type: one pointer
	shapeInt64          // int64, uint64; int, uint, uintptr on 64-bit platforms
	shapeInt32          // int32, uint32; int, uint, uintptr on 32-bit platforms
	shapeBool           // bool
	shapeFloat64        // float64
	shapeOther          // anything else: the reflective stub
)

func shapeOf(t reflect.Type) int {
	switch t.Kind() {
	case reflect.String:
		return shapeString
	case reflect.Slice:
		return shapeSlice
	case reflect.Pointer, reflect.Map:
		return shapeWord
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64, reflect.Uintptr, reflect.Int32, reflect.Uint32:
		// By size: int, uint and uintptr are 32 bits on a 32-bit
		// platform, where an int64 stub would not match the field.
		if t.Size() == 8 {
			return shapeInt64
		}
		return shapeInt32
	case reflect.Bool:
		return shapeBool
	case reflect.Float64:
		return shapeFloat64
	}
	return shapeOther
}

type none struct{}

// shape is the set of machine types a direct stub's argument or reply
// is declared with.
type shape interface {
	none | string | []byte | unsafe.Pointer | int64 | int32 | bool | float64
}

// directFrame is one direct call's memory, allocated once: the
// invocation, its argument slot, the argument and the reply.
type directFrame[A, R shape] struct {
	inv   protocol.Invocation
	args  [1]any
	arg   A
	reply R
}

// direct returns the func value that fills a field of s's type when the
// field has a shape direct stubs handle, else ok false.
func (s *stubMethod) direct(ft reflect.Type) (fn reflect.Value, ok bool) {
	arg, reply := shapeNone, shapeNone
	if s.nargs > 1 {
		return reflect.Value{}, false
	}
	if s.nargs == 1 {
		if arg = shapeOf(ft.In(1)); arg == shapeOther {
			return reflect.Value{}, false
		}
	}
	if s.replyField >= 0 {
		if reply = shapeOf(s.replyType); reply == shapeOther {
			return reflect.Value{}, false
		}
	}
	var f any
	switch arg {
	case shapeNone:
		f = withArg[none](s, ft, reply)
	case shapeString:
		f = withArg[string](s, ft, reply)
	case shapeSlice:
		f = withArg[[]byte](s, ft, reply)
	case shapeWord:
		f = withArg[unsafe.Pointer](s, ft, reply)
	case shapeInt64:
		f = withArg[int64](s, ft, reply)
	case shapeInt32:
		f = withArg[int32](s, ft, reply)
	case shapeBool:
		f = withArg[bool](s, ft, reply)
	case shapeFloat64:
		f = withArg[float64](s, ft, reply)
	}
	// f is a func value of the field's machine signature; make a value of
	// the field's type with the same closure.
	fn = reflect.New(ft).Elem()
	*(*unsafe.Pointer)(fn.Addr().UnsafePointer()) = eface.Of(&f).Data
	return fn, true
}

func withArg[A shape](s *stubMethod, ft reflect.Type, reply int) any {
	switch reply {
	case shapeNone:
		return errorOnly[A](s, ft)
	case shapeString:
		return withReply[A, string](s, ft)
	case shapeSlice:
		return withReply[A, []byte](s, ft)
	case shapeWord:
		return withReply[A, unsafe.Pointer](s, ft)
	case shapeInt64:
		return withReply[A, int64](s, ft)
	case shapeInt32:
		return withReply[A, int32](s, ft)
	case shapeBool:
		return withReply[A, bool](s, ft)
	case shapeFloat64:
		return withReply[A, float64](s, ft)
	}
	panic("proxy: unknown reply shape")
}

// argBoxer returns what puts the frame's argument into its slot as an
// interface value of the parameter's type (word: the type word of the
// field's parameter), the data word pointing at the frame's copy (or, for
// a pointer or a map, being it), as Go would box a copy; nil when there is
// no argument.
func argBoxer[A shape](ft reflect.Type) (word unsafe.Pointer, direct bool) {
	var a A
	if _, isNone := any(a).(none); isNone {
		return nil, false
	}
	_, isPtr := any(a).(unsafe.Pointer)
	return eface.TypeWord(ft.In(1)), isPtr
}

// fill sets fr's invocation from s, ctx and a: names, the argument boxed
// with type word argT (direct: a is the pointer itself) and the context's
// attachments.
func fill[A, R shape](s *stubMethod, ctx context.Context, fr *directFrame[A, R], a A, argT unsafe.Pointer, direct bool) {
	inv := &fr.inv
	inv.Service, inv.Version, inv.Group, inv.Method = s.service, s.version, s.group, s.method
	if argT != nil {
		fr.arg = a
		if direct {
			fr.args[0] = eface.Box(argT, *(*unsafe.Pointer)(unsafe.Pointer(&fr.arg)))
		} else {
			fr.args[0] = eface.Box(argT, unsafe.Pointer(&fr.arg))
		}
		inv.Args = fr.args[:]
	}
	if at := service.AttachmentsFrom(ctx); at != nil {
		inv.Attachments = at
	}
}

func withReply[A, R shape](s *stubMethod, ft reflect.Type) any {
	argT, direct := argBoxer[A](ft)
	replyPtrT := eface.TypeWord(reflect.PointerTo(s.replyType))
	call := func(ctx context.Context, a A) (R, error) {
		var zero R
		if ctx == nil {
			return zero, ErrNilContext
		}
		fr := new(directFrame[A, R])
		fill(s, ctx, fr, a, argT, direct)
		fr.inv.Reply = eface.Box(replyPtrT, unsafe.Pointer(&fr.reply))
		res, err := s.inv.Invoke(ctx, &fr.inv)
		if err == nil && (res == nil || res.Value != fr.inv.Reply) {
			err = s.setReply(reflect.NewAt(s.replyType, unsafe.Pointer(&fr.reply)).Elem(), res)
		}
		if err != nil {
			return zero, err
		}
		return fr.reply, nil
	}
	if argT == nil {
		return func(ctx context.Context) (R, error) { return call(ctx, *new(A)) }
	}
	return call
}

func errorOnly[A shape](s *stubMethod, ft reflect.Type) any {
	argT, direct := argBoxer[A](ft)
	call := func(ctx context.Context, a A) error {
		if ctx == nil {
			return ErrNilContext
		}
		fr := new(directFrame[A, none])
		fill(s, ctx, fr, a, argT, direct)
		_, err := s.inv.Invoke(ctx, &fr.inv)
		return err
	}
	if argT == nil {
		return func(ctx context.Context) error { return call(ctx, *new(A)) }
	}
	return call
}
