package service

import (
	"context"
	"errors"
	"fmt"
	"github.com/minidubbo/minidubbo/internal/words"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// Method is one method of a service type that fits the service rules:
//
//	func (s *S) M(ctx context.Context, args...) (T, error)
//	func (s *S) M(ctx context.Context, args...) error
//
// A Method is immutable and safe for concurrent use.
type Method struct {
	// Name is the Go name of the method.
	Name string
	// ArgTypes are the parameter types after the context, in order.
	ArgTypes []reflect.Type
	// ReplyType is T, or nil for a method that returns only an error.
	ReplyType reflect.Type

	fn     reflect.Value // the method expression, receiver first
	bufs   sync.Pool     // of *argBuf
	recv   reflect.Type  // the receiver's type
	direct direct        // nil: no direct form, Call only
}

// Signature returns the method's parameter list and results as Go writes
// them, for example "SayHello(context.Context, string) (string, error)".
func (m *Method) Signature() string {
	var b strings.Builder
	b.WriteString(m.Name)
	b.WriteString("(context.Context")
	for _, t := range m.ArgTypes {
		b.WriteString(", ")
		b.WriteString(t.String())
	}
	b.WriteByte(')')
	if m.ReplyType == nil {
		b.WriteString(" error")
	} else {
		b.WriteString(" (")
		b.WriteString(m.ReplyType.String())
		b.WriteString(", error)")
	}
	return b.String()
}

// Call calls the method on rcvr with ctx and args, which come from Args. It
// returns the reply (nil for an error-only method) and the method's error.
// Call does not recover panics of the method. args may not be used again.
func (m *Method) Call(ctx context.Context, rcvr reflect.Value, args Args) (any, error) {
	b := args.b
	if b == nil || b.m != m {
		return nil, fmt.Errorf("service: %s called with arguments not from its Args", m.Name)
	}
	b.ctx = ctx
	b.in[0] = rcvr
	b.in[1] = reflect.ValueOf(&b.ctx).Elem()
	out := m.fn.Call(b.in)
	b.release()
	var err error
	if e := out[len(out)-1]; !e.IsNil() {
		err = e.Interface().(error)
	}
	if m.ReplyType == nil {
		return nil, err
	}
	return out[0].Interface(), err
}

// CallDirect calls the method on rcvr with args as Args and Call together
// would, but without reflect.Value.Call and its allocations, when it can:
// when the receiver is a pointer, the method takes at most one argument
// after the context and both that argument and the reply (if any) are a
// string, a []byte, a pointer, a map, a number or a bool (or the argument
// a Borrowed), and args hold exactly the
// parameter types. Otherwise called is false and nothing was called: the
// caller goes through Args and Call, which convert or reject the
// arguments. Like Call, it does not recover panics of the method.
//
// A string or []byte reply is kept in into when it is not nil (see
// Reply).
//
// A receiver that is not a pointer must be addressable (an element of
// reflect.New), and is then called through its address by the method
// Go generates for the pointer type, which copies it as Call would.
func (m *Method) CallDirect(ctx context.Context, rcvr reflect.Value, args []any, into *Reply) (reply any, called bool, err error) {
	if m.direct == nil || !rcvr.IsValid() || rcvr.Type() != m.recv {
		return nil, false, nil
	}
	if rcvr.Kind() == reflect.Pointer {
		return m.direct(rcvr.UnsafePointer(), ctx, args, into)
	}
	if !rcvr.CanAddr() {
		return nil, false, nil
	}
	return m.direct(rcvr.Addr().UnsafePointer(), ctx, args, into)
}

// Args are the checked arguments of one call of a Method, from
// Method.Args, to be passed to Method.Call once. Their buffers are
// recycled, so a call on a provider allocates little besides what
// reflect.Value.Call needs.
type Args struct{ b *argBuf }

type argBuf struct {
	m   *Method
	ctx context.Context
	in  []reflect.Value // receiver, context, arguments
}

func (b *argBuf) release() {
	clear(b.in)
	b.ctx = nil
	b.m.bufs.Put(b)
}

// Rejected is an exported method that does not fit the service rules, and why.
type Rejected struct {
	Method string
	Reason string
}

// Table is the method table of a service type: its exported methods that fit
// the rules of Method, found once by reflection. Tables are cached per type
// and are immutable and safe for concurrent use.
type Table struct {
	typ      reflect.Type
	methods  map[string]*Method
	names    []string
	rejected []Rejected
}

// Type returns the service type (the receiver type of the methods).
func (t *Table) Type() reflect.Type { return t.typ }

// Method returns the method called name. Besides its Go name, each method
// is found under the name with its first letter in lower case
// ("SayHello" and "sayHello"), as Dubbo's Java interfaces name them, unless
// another method has that name.
func (t *Table) Method(name string) (*Method, bool) {
	m, ok := t.methods[name]
	return m, ok
}

// Names returns the Go names of the methods, sorted.
func (t *Table) Names() []string { return slices.Clone(t.names) }

// Rejected returns the exported methods that do not fit the rules, with
// the reason for each, sorted by name.
func (t *Table) Rejected() []Rejected { return slices.Clone(t.rejected) }

// Strict returns an error naming every exported method that does not fit
// the rules, or nil when all of them fit.
func (t *Table) Strict() error {
	if len(t.rejected) == 0 {
		return nil
	}
	return fmt.Errorf("service: %s: %s", t.typ, rejectedList(t.rejected))
}

func rejectedList(rs []Rejected) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("method %s %s", r.Method, r.Reason)
	}
	return strings.Join(parts, "; ")
}

type tableEntry struct {
	t   *Table
	err error
}

var tables sync.Map // reflect.Type -> tableEntry

// TableOf returns the method table of a service type, usually a pointer to
// a struct. The table is built on first use and cached. It returns an error
// when no method of typ fits the rules; the error names each exported
// method and the rule it breaks.
func TableOf(typ reflect.Type) (*Table, error) {
	if typ == nil {
		return nil, errors.New("service: nil service type")
	}
	if e, ok := tables.Load(typ); ok {
		te := e.(tableEntry)
		return te.t, te.err
	}
	t, err := buildTable(typ)
	e, _ := tables.LoadOrStore(typ, tableEntry{t, err})
	te := e.(tableEntry)
	return te.t, te.err
}

// TableFor returns the method table of the dynamic type of v; see TableOf.
func TableFor(v any) (*Table, error) {
	if v == nil {
		return nil, errors.New("service: nil service value")
	}
	return TableOf(reflect.TypeOf(v))
}

func buildTable(typ reflect.Type) (*Table, error) {
	t := &Table{typ: typ, methods: make(map[string]*Method)}
	for i := range typ.NumMethod() {
		rm := typ.Method(i)
		if !rm.IsExported() {
			continue
		}
		m, reason := suitable(rm)
		if reason != "" {
			t.rejected = append(t.rejected, Rejected{Method: rm.Name, Reason: reason})
			continue
		}
		t.methods[m.Name] = m
		t.names = append(t.names, m.Name)
	}
	// Lower-case aliases, after every Go name is known so none is shadowed.
	for _, name := range t.names {
		alias := lowerFirst(name)
		if _, taken := t.methods[alias]; !taken {
			t.methods[alias] = t.methods[name]
		}
	}
	slices.Sort(t.names)
	slices.SortFunc(t.rejected, func(a, b Rejected) int { return strings.Compare(a.Method, b.Method) })
	if len(t.names) > 0 {
		return t, nil
	}
	msg := fmt.Sprintf("service: type %s has no method of the form "+
		"func (s %s) M(ctx context.Context, args...) (T, error) or ... error", typ, typ)
	if len(t.rejected) > 0 {
		msg += ": " + rejectedList(t.rejected)
	}
	if typ.Kind() != reflect.Pointer && reflect.PointerTo(typ).NumMethod() > typ.NumMethod() {
		msg += fmt.Sprintf(" (the methods of *%s are not in the method set of %s: pass a pointer)", typ, typ)
	}
	return nil, errors.New(msg)
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// suitable returns the Method for rm, or the reason it does not fit.
func suitable(rm reflect.Method) (*Method, string) {
	ft := rm.Type // receiver first
	if ft.IsVariadic() {
		return nil, "is variadic"
	}
	if ft.NumIn() < 2 || ft.In(1) != contextType {
		return nil, "must take context.Context as its first parameter"
	}
	switch ft.NumOut() {
	case 1, 2:
	default:
		return nil, fmt.Sprintf("must return (T, error) or error, not %d results", ft.NumOut())
	}
	if ft.Out(ft.NumOut()-1) != errorType {
		return nil, "must return error as its last result"
	}
	m := &Method{Name: rm.Name, fn: rm.Func, recv: ft.In(0)}
	for i := 2; i < ft.NumIn(); i++ {
		at := ft.In(i)
		if why := unsendable(at); why != "" {
			return nil, fmt.Sprintf("has parameter %d of type %s, which %s", i-1, at, why)
		}
		m.ArgTypes = append(m.ArgTypes, at)
	}
	if ft.NumOut() == 2 {
		rt := ft.Out(0)
		if why := unsendable(rt); why != "" {
			return nil, fmt.Sprintf("returns %s, which %s", rt, why)
		}
		m.ReplyType = rt
	}
	m.direct = directFor(rm)
	return m, ""
}

// unsendable says why values of t cannot cross the wire, or "".
func unsendable(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return "cannot be serialized"
	}
	if t == contextType {
		return "is a second context.Context"
	}
	return ""
}

// Args checks args against the method's parameter types and returns them as
// Args for Call. Values of the declared types are taken as they
// are; nil is taken for pointer, interface, slice and map parameters, and
// numbers are converted between Go's numeric kinds when no value is lost (a
// JSON float64 of 3 becomes an int32 of 3). Anything else is an error that
// names the method, its parameter types, and the offending argument.
func (m *Method) Args(args []any) (Args, error) {
	if len(args) != len(m.ArgTypes) {
		return Args{}, fmt.Errorf("service: %s takes %s after the context, got %d",
			m.Signature(), words.Arguments(len(m.ArgTypes)), len(args))
	}
	b, _ := m.bufs.Get().(*argBuf)
	if b == nil {
		b = &argBuf{m: m, in: make([]reflect.Value, len(m.ArgTypes)+2)}
	}
	for i, a := range args {
		v, ok := convert(a, m.ArgTypes[i])
		if !ok {
			b.release()
			return Args{}, fmt.Errorf("service: %s: argument %d is %s, want %s",
				m.Signature(), i+1, typeName(a), m.ArgTypes[i])
		}
		b.in[i+2] = v
	}
	return Args{b}, nil
}

func typeName(a any) string {
	if a == nil {
		return "nil"
	}
	return reflect.TypeOf(a).String()
}

// convert returns a as a value assignable to t.
func convert(a any, t reflect.Type) (reflect.Value, bool) {
	if a == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
			return reflect.Zero(t), true
		}
		return reflect.Value{}, false
	}
	v := reflect.ValueOf(a)
	if v.Type() == t || v.Type().AssignableTo(t) {
		return v, true
	}
	if isNumber(v.Kind()) && isNumber(t.Kind()) {
		c := v.Convert(t)
		if c.Convert(v.Type()).Equal(v) && sameSign(v, c) {
			return c, true
		}
	}
	return reflect.Value{}, false
}

func isNumber(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Float64
}

// sameSign rejects conversions that wrap a negative number into an unsigned
// one and back (which the round trip alone does not catch for equal widths).
func sameSign(a, b reflect.Value) bool {
	neg := func(v reflect.Value) bool {
		switch {
		case v.CanInt():
			return v.Int() < 0
		case v.CanFloat():
			return v.Float() < 0
		}
		return false
	}
	return neg(a) == neg(b)
}
