package proxy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
	invType     = reflect.TypeFor[protocol.Invocation]()
	valueType   = reflect.TypeFor[reflect.Value]()
)

// reflectiveStubs makes Refer fill every field through reflect.MakeFunc,
// for the tests that compare both kinds of stub.
var reflectiveStubs bool

// ErrNilContext is returned by a stub called with a nil context.
var ErrNilContext = errors.New("proxy: nil context")

// Refer fills the func fields of stub, a pointer to a struct, so that each
// call goes through inv. Every exported func field must have one of the forms
//
//	func(ctx context.Context, args...) (T, error)
//	func(ctx context.Context, args...) error
//
// and calls the remote method named by its `dubbo:"name"` tag, or else by
// the field name. A field tagged `dubbo:"-"` is left alone, and embedded
// structs (such as service.Echo) are filled too. Refer checks every field
// before it fills any, and returns an error naming each field and what is
// wrong with it.
//
// A call builds a protocol.Invocation with the service, version and group
// of inv.URL(), the method, the arguments, the attachments of ctx
// (service.AttachmentsFrom) and a Reply pointing at a new T, and returns
// the reply or the invoker's error unchanged: a business error from the
// provider is a *service.Error with Remote set (see errors.As).
//
// Everything a call needs is resolved here, once; a call allocates a
// single frame for its invocation, arguments and reply. A field with at
// most one argument after the context, whose argument and reply are each
// a string, a slice, a pointer, a map, a bool, a float64 or a 32- or
// 64-bit integer, is filled with a plain func; other fields go through
// reflect.MakeFunc, which adds what it needs to pass the arguments in.
func Refer(stub any, inv protocol.Invoker) error {
	if inv == nil {
		return errors.New("proxy: refer: nil invoker")
	}
	u := inv.URL()
	if u == nil {
		return errors.New("proxy: refer: invoker has no URL")
	}
	pv := reflect.ValueOf(stub)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("proxy: refer: stub must be a non-nil pointer to a struct, not %s", typeString(stub))
	}
	var (
		fields []reflect.Value
		calls  []*stubMethod
		errs   []error
	)
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		st := v.Type()
		for i := range st.NumField() {
			sf := st.Field(i)
			name := prefix + sf.Name
			tag := sf.Tag.Get("dubbo")
			if tag == "-" {
				continue
			}
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct && sf.IsExported() {
				walk(v.Field(i), name+".")
				continue
			}
			if !sf.IsExported() {
				if sf.Type.Kind() == reflect.Func {
					errs = append(errs, fmt.Errorf("field %s is unexported, so it cannot be filled (export it, or tag it `dubbo:\"-\"`)", name))
				}
				continue
			}
			method := sf.Name
			if tag != "" {
				method = tag
			}
			sm, err := newStubMethod(inv, u, method, sf.Type)
			if err != nil {
				errs = append(errs, fmt.Errorf("field %s: %w", name, err))
				continue
			}
			fields = append(fields, v.Field(i))
			calls = append(calls, sm)
		}
	}
	walk(pv.Elem(), "")
	if len(errs) > 0 {
		return fmt.Errorf("proxy: refer %s: %w", pv.Type(), errors.Join(errs...))
	}
	if len(calls) == 0 {
		return fmt.Errorf("proxy: refer %s: no func fields to fill", pv.Type())
	}
	for i, f := range fields {
		if fn, ok := calls[i].direct(f.Type()); ok && !reflectiveStubs {
			f.Set(fn)
			continue
		}
		f.Set(reflect.MakeFunc(f.Type(), calls[i].call))
	}
	return nil
}

func typeString(v any) string {
	if v == nil {
		return "nil"
	}
	return reflect.TypeOf(v).String()
}

// stubMethod is one filled field: everything a call needs, resolved once.
type stubMethod struct {
	inv                             protocol.Invoker
	service, version, group, method string
	nargs                           int

	frame      reflect.Type // struct{Inv; Args [nargs]any; Out [nout]reflect.Value; Err error; Reply T}
	argsOff    uintptr
	outOff     uintptr
	nout       int
	errField   int
	replyField int // -1 for an error-only method
	replyType  reflect.Type
}

// newStubMethod checks a field's func type and lays out its call frame.
func newStubMethod(inv protocol.Invoker, u *protocol.URL, method string, ft reflect.Type) (*stubMethod, error) {
	if ft.Kind() != reflect.Func {
		return nil, fmt.Errorf("is a %s, not a func", ft)
	}
	if ft.IsVariadic() {
		return nil, fmt.Errorf("%s is variadic", ft)
	}
	if ft.NumIn() == 0 || ft.In(0) != contextType {
		return nil, fmt.Errorf("%s: the first parameter must be context.Context", ft)
	}
	switch ft.NumOut() {
	case 1, 2:
	case 0:
		return nil, fmt.Errorf("%s: must return error or (T, error), it returns nothing", ft)
	default:
		return nil, fmt.Errorf("%s: too many results (%d), want error or (T, error)", ft, ft.NumOut())
	}
	if ft.Out(ft.NumOut()-1) != errorType {
		return nil, fmt.Errorf("%s: the last result must be error, not %s", ft, ft.Out(ft.NumOut()-1))
	}
	for i := 1; i < ft.NumIn(); i++ {
		if k := ft.In(i).Kind(); k == reflect.Chan || k == reflect.Func || k == reflect.UnsafePointer {
			return nil, fmt.Errorf("%s: parameter %d of type %s cannot be serialized", ft, i, ft.In(i))
		}
	}
	if ft.NumOut() == 2 {
		if k := ft.Out(0).Kind(); k == reflect.Chan || k == reflect.Func || k == reflect.UnsafePointer {
			return nil, fmt.Errorf("%s: result of type %s cannot be serialized", ft, ft.Out(0))
		}
	}
	sm := &stubMethod{
		inv:     inv,
		service: u.Interface(), version: u.Version(), group: u.Group(),
		method:     method,
		nargs:      ft.NumIn() - 1,
		nout:       ft.NumOut(),
		replyField: -1,
	}
	fields := []reflect.StructField{{Name: "Inv", Type: invType}}
	argsField := -1
	if sm.nargs > 0 {
		argsField = len(fields)
		fields = append(fields, reflect.StructField{Name: "Args", Type: reflect.ArrayOf(sm.nargs, anyType)})
	}
	outField := len(fields)
	fields = append(fields, reflect.StructField{Name: "Out", Type: reflect.ArrayOf(sm.nout, valueType)})
	sm.errField = len(fields)
	fields = append(fields, reflect.StructField{Name: "Err", Type: errorType})
	if sm.nout == 2 {
		sm.replyType = ft.Out(0)
		sm.replyField = len(fields)
		fields = append(fields, reflect.StructField{Name: "Reply", Type: sm.replyType})
	}
	sm.frame = reflect.StructOf(fields)
	if argsField >= 0 {
		sm.argsOff = sm.frame.Field(argsField).Offset
	}
	sm.outOff = sm.frame.Field(outField).Offset
	return sm, nil
}

// call is the body of a filled field, as reflect.MakeFunc calls it.
func (s *stubMethod) call(in []reflect.Value) []reflect.Value {
	fv := reflect.New(s.frame)
	base := fv.UnsafePointer()
	f := fv.Elem()
	inv := (*protocol.Invocation)(base) // Inv is the first field
	out := unsafe.Slice((*reflect.Value)(unsafe.Add(base, s.outOff)), s.nout)
	errv := f.Field(s.errField)

	ctx, _ := in[0].Interface().(context.Context)
	var reply reflect.Value
	if s.replyField >= 0 {
		reply = f.Field(s.replyField)
		out[0] = reply
	}
	out[s.nout-1] = errv
	if ctx == nil {
		*(*error)(errv.Addr().UnsafePointer()) = ErrNilContext
		return out
	}
	inv.Service, inv.Version, inv.Group, inv.Method = s.service, s.version, s.group, s.method
	if s.nargs > 0 {
		args := unsafe.Slice((*any)(unsafe.Add(base, s.argsOff)), s.nargs)
		for i := range args {
			args[i] = in[i+1].Interface()
		}
		inv.Args = args
	}
	if a := service.AttachmentsFrom(ctx); a != nil {
		inv.Attachments = a
	}
	if s.replyField >= 0 {
		inv.Reply = reply.Addr().Interface()
	}
	res, err := s.inv.Invoke(ctx, inv)
	if err == nil && s.replyField >= 0 && (res == nil || res.Value != inv.Reply) {
		err = s.setReply(reply, res)
	}
	if err != nil {
		if s.replyField >= 0 {
			reply.SetZero()
		}
		*(*error)(errv.Addr().UnsafePointer()) = err
	}
	return out
}

// setReply stores a result whose Value is not the Reply pointer (an
// in-process invoker, a mock) into reply.
func (s *stubMethod) setReply(reply reflect.Value, res *protocol.Result) error {
	if res == nil || res.Value == nil {
		reply.SetZero()
		return nil
	}
	rv := reflect.ValueOf(res.Value)
	switch {
	case rv.Type().AssignableTo(s.replyType):
		reply.Set(rv)
		return nil
	case rv.Kind() == reflect.Pointer && rv.Type().Elem() == s.replyType:
		if rv.IsNil() {
			reply.SetZero()
		} else {
			reply.Set(rv.Elem())
		}
		return nil
	case rv.Type().ConvertibleTo(s.replyType) && isNumber(rv.Kind()) && isNumber(s.replyType.Kind()):
		reply.Set(rv.Convert(s.replyType))
		return nil
	}
	return fmt.Errorf("%w: proxy: %s.%s returned %s, want %s",
		status.ErrBadResponse, s.service, s.method, rv.Type(), s.replyType)
}

func isNumber(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Float64 }
