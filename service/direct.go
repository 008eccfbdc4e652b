package service

import (
	"context"
	"reflect"
	"unsafe"

	"github.com/minidubbo/minidubbo/internal/eface"
)

// direct calls a method without reflect.Value.Call: the method's code
// called through a func value of the same machine signature, with the
// receiver's pointer. It returns called false, having called nothing,
// when args are not exactly of the parameter types.
type direct func(rcvr unsafe.Pointer, ctx context.Context, args []any, into *Reply) (reply any, called bool, err error)

// Reply is room for the reply of one direct call (Method.CallDirect): a
// string or []byte reply is kept in it, and the reply's interface value
// points there instead of at a copy of its own, so that a caller that
// allocates a Reply together with other things saves an allocation. A
// Reply holds one call's reply; it must not be used for another call
// while that reply is in use.
type Reply struct {
	s string
	b []byte
}

var (
	stringWord = eface.TypeWord(reflect.TypeFor[string]())
	bytesWord  = eface.TypeWord(reflect.TypeFor[[]byte]())
)

// boxAt returns an interface value holding *p, of the type whose type
// word is t (p's element type), without copying it: its data word is p.
// This is what any(*p) would be, but for the allocation of the copy; so
// *p must never change afterwards. p escapes as if boxed itself.
func boxAt[T any](p *T, t unsafe.Pointer) any {
	v := any(p)
	eface.Of(&v).Type = t
	return v
}

// boxString and boxBytes box a reply, in into when there is one.
func boxString(v string, into *Reply) any {
	if into == nil {
		return v
	}
	into.s = v
	return boxAt(&into.s, stringWord)
}

func boxBytes(v []byte, into *Reply) any {
	if into == nil {
		return v
	}
	into.b = v
	return boxAt(&into.b, bytesWord)
}

// Shapes of a parameter or a result that direct calls handle: the Go
// types whose machine representation a func value may declare in their
// place. Every pointer and map type is one machine word, passed like an
// unsafe.Pointer and held in an interface value's data word itself; the
// others are exactly the types named.
const (
	shapeNone     = iota // no such parameter or result
	shapeString          // string
	shapeBytes           // []byte
	shapeWord            // any pointer or map type
	shapeInt             // int
	shapeInt32           // int32
	shapeInt64           // int64
	shapeBool            // bool
	shapeFloat64         // float64
	shapeBorrowed        // Borrowed (an argument only)
)

// value is the Go types of the shapes.
type value interface {
	string | []byte | Borrowed | unsafe.Pointer | int | int32 | int64 | bool | float64
}

var exact = map[reflect.Type]int{
	reflect.TypeFor[string]():  shapeString,
	reflect.TypeFor[[]byte]():  shapeBytes,
	reflect.TypeFor[int]():     shapeInt,
	reflect.TypeFor[int32]():   shapeInt32,
	reflect.TypeFor[int64]():   shapeInt64,
	reflect.TypeFor[bool]():    shapeBool,
	reflect.TypeFor[float64](): shapeFloat64,
}

// argShapes are the shapes of parameters only: a Borrowed reply is
// encoded as any named type is, by reflection.
var argShapes = map[reflect.Type]int{
	reflect.TypeFor[Borrowed](): shapeBorrowed,
}

func shapeOf(t reflect.Type) int {
	if s, ok := exact[t]; ok {
		return s
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
		return shapeWord
	}
	return -1
}

// directFor returns the direct caller of method rm, or nil when its shape
// has none: the method must take at most one argument after the context,
// and the parameter and the reply be of a shape above. The caller is
// given a pointer to the receiver: for a method of a type that is not a
// pointer, it calls the method of the pointer type that Go generates,
// which copies the receiver and calls rm.
func directFor(rm reflect.Method) direct {
	fn, ft := rm.Func, rm.Type
	if recv := ft.In(0); recv.Kind() != reflect.Pointer {
		pm, ok := reflect.PointerTo(recv).MethodByName(rm.Name)
		if !ok {
			return nil
		}
		fn, ft = pm.Func, pm.Type
	}
	if !fn.IsValid() || ft.NumIn() > 3 {
		return nil
	}
	arg, reply := shapeNone, shapeNone
	var argT, replyT unsafe.Pointer
	if ft.NumIn() == 3 {
		arg, argT = shapeOf(ft.In(2)), eface.TypeWord(ft.In(2))
		if s, ok := argShapes[ft.In(2)]; ok {
			arg = s
		}
	}
	if ft.NumOut() == 2 {
		reply, replyT = shapeOf(ft.Out(0)), eface.TypeWord(ft.Out(0))
	}
	if arg < 0 || reply < 0 {
		return nil
	}
	code := fn.Interface() // a func value whose first parameter is the receiver pointer
	f := eface.Of(&code).Data
	if arg != shapeWord {
		argT = nil // a type assertion checks the argument
	}
	switch arg {
	case shapeNone:
		return withReply[none](f, reply, nil, replyT)
	case shapeString:
		return withReply[string](f, reply, nil, replyT)
	case shapeBytes:
		return withReply[[]byte](f, reply, nil, replyT)
	case shapeBorrowed:
		return withReply[Borrowed](f, reply, nil, replyT)
	case shapeWord:
		return withReply[unsafe.Pointer](f, reply, argT, replyT)
	case shapeInt:
		return withReply[int](f, reply, nil, replyT)
	case shapeInt32:
		return withReply[int32](f, reply, nil, replyT)
	case shapeInt64:
		return withReply[int64](f, reply, nil, replyT)
	case shapeBool:
		return withReply[bool](f, reply, nil, replyT)
	case shapeFloat64:
		return withReply[float64](f, reply, nil, replyT)
	}
	return nil
}

// none stands for the missing argument of a method without one.
type none struct{}

// funcOf reinterprets the func value f as one of type F.
func funcOf[F any](f unsafe.Pointer) F { return *(*F)(unsafe.Pointer(&f)) }

// argOf returns a as an A when its type is the parameter's: for a word
// (A unsafe.Pointer), the data word of a when its type word is t;
// otherwise a type assertion.
func argOf[A value | none](a any, t unsafe.Pointer) (A, bool) {
	var v A
	if t != nil {
		e := eface.Of(&a)
		if e.Type != t {
			return v, false
		}
		*(*unsafe.Pointer)(unsafe.Pointer(&v)) = e.Data
		return v, true
	}
	v, ok := a.(A)
	return v, ok
}

// boxPlain boxes a number or a bool as Go does.
func boxPlain[R value](v R, _ *Reply) any { return v }

// withReply returns the direct caller of a method whose argument is an A
// (none: no argument) and whose reply has the shape reply.
func withReply[A value | none](f unsafe.Pointer, reply int, argT, replyT unsafe.Pointer) direct {
	switch reply {
	case shapeNone:
		return errorOnly[A](f, argT)
	case shapeString:
		return call[A, string](f, argT, boxString)
	case shapeBytes:
		return call[A, []byte](f, argT, boxBytes)
	case shapeWord:
		return call[A, unsafe.Pointer](f, argT, func(p unsafe.Pointer, _ *Reply) any { return eface.Box(replyT, p) })
	case shapeInt:
		return call[A, int](f, argT, boxPlain[int])
	case shapeInt32:
		return call[A, int32](f, argT, boxPlain[int32])
	case shapeInt64:
		return call[A, int64](f, argT, boxPlain[int64])
	case shapeBool:
		return call[A, bool](f, argT, boxPlain[bool])
	case shapeFloat64:
		return call[A, float64](f, argT, boxPlain[float64])
	}
	return nil
}

// call returns the direct caller of a method taking an A (none: nothing)
// and returning an R and an error.
func call[A value | none, R value](f, argT unsafe.Pointer, box func(R, *Reply) any) direct {
	if _, ok := any(*new(A)).(none); ok {
		m := funcOf[func(unsafe.Pointer, context.Context) (R, error)](f)
		return func(r unsafe.Pointer, ctx context.Context, args []any, into *Reply) (any, bool, error) {
			if len(args) != 0 {
				return nil, false, nil
			}
			v, err := m(r, ctx)
			return box(v, into), true, err
		}
	}
	m := funcOf[func(unsafe.Pointer, context.Context, A) (R, error)](f)
	return func(r unsafe.Pointer, ctx context.Context, args []any, into *Reply) (any, bool, error) {
		if len(args) != 1 {
			return nil, false, nil
		}
		a, ok := argOf[A](args[0], argT)
		if !ok {
			return nil, false, nil
		}
		v, err := m(r, ctx, a)
		return box(v, into), true, err
	}
}

// errorOnly returns the direct caller of a method taking an A (none:
// nothing) and returning only an error.
func errorOnly[A value | none](f, argT unsafe.Pointer) direct {
	if _, ok := any(*new(A)).(none); ok {
		m := funcOf[func(unsafe.Pointer, context.Context) error](f)
		return func(r unsafe.Pointer, ctx context.Context, args []any, _ *Reply) (any, bool, error) {
			if len(args) != 0 {
				return nil, false, nil
			}
			return nil, true, m(r, ctx)
		}
	}
	m := funcOf[func(unsafe.Pointer, context.Context, A) error](f)
	return func(r unsafe.Pointer, ctx context.Context, args []any, _ *Reply) (any, bool, error) {
		if len(args) != 1 {
			return nil, false, nil
		}
		a, ok := argOf[A](args[0], argT)
		if !ok {
			return nil, false, nil
		}
		return nil, true, m(r, ctx, a)
	}
}
