package proxy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// KeySignatures is the provider URL parameter carrying the service's
// method signatures in compact form (as Dubbo's metadata does), so
// consumers can check their stubs at Refer and tools can show what a
// method takes: "Add(int,int)int;Get(Order)*Order;Ping()", methods sorted,
// separated by ';', each name(args)reply with no reply for an error-only
// method. Types are written without their package: Order, []string,
// map[string]int, any.
const KeySignatures = "signatures"

// Signatures returns the KeySignatures value for the provider's methods.
func (p *Provider) Signatures() string {
	names := p.table.Names()
	parts := make([]string, 0, len(names))
	for _, n := range names {
		m, _ := p.table.Method(n)
		parts = append(parts, signatureOf(n, m.ArgTypes, m.ReplyType).String())
	}
	return strings.Join(parts, ";")
}

// Signature is one method's compact signature.
type Signature struct {
	Name  string
	Args  []string
	Reply string // "" for an error-only method
}

// String renders s as in KeySignatures: "Get(Order)*Order".
func (s Signature) String() string {
	return s.Name + "(" + strings.Join(s.Args, ",") + ")" + s.Reply
}

// Shape renders s for people: "Get(Order) *Order", "Ping() error".
func (s Signature) Shape() string {
	reply := "error"
	if s.Reply != "" {
		reply = "(" + s.Reply + ", error)"
	}
	return s.Name + "(" + strings.Join(s.Args, ", ") + ") " + reply
}

func signatureOf(name string, args []reflect.Type, reply reflect.Type) Signature {
	s := Signature{Name: name, Args: make([]string, len(args))}
	for i, t := range args {
		s.Args[i] = compactType(t)
	}
	if reply != nil {
		s.Reply = compactType(reply)
	}
	return s
}

// compactType writes t without package paths.
// Only struct types keep their name; other named types are written as
// what they are on the wire (a time.Duration is an int64).
func compactType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() != "" {
			return t.Name()
		}
		return "struct"
	case reflect.Pointer:
		return "*" + compactType(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "[]byte"
		}
		return "[]" + compactType(t.Elem())
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), compactType(t.Elem()))
	case reflect.Map:
		return "map[" + compactType(t.Key()) + "]" + compactType(t.Elem())
	case reflect.Interface:
		return "any"
	}
	return t.Kind().String()
}

// ParseSignatures parses a KeySignatures value. A malformed entry is an
// error naming it.
func ParseSignatures(v string) (map[string]Signature, error) {
	out := map[string]Signature{}
	if v == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(v, ";") {
		open := strings.IndexByte(part, '(')
		closing := matchingParen(part, open)
		if open <= 0 || closing < 0 {
			return nil, fmt.Errorf("proxy: malformed signature %q", part)
		}
		s := Signature{Name: part[:open], Reply: part[closing+1:]}
		if in := part[open+1 : closing]; in != "" {
			s.Args = splitTypes(in)
		}
		out[s.Name] = s
	}
	return out, nil
}

func matchingParen(s string, open int) int {
	if open < 0 {
		return -1
	}
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// splitTypes splits "int,map[string]int,[]Order" at top-level commas.
func splitTypes(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(', '{':
			depth++
		case ']', ')', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// class is what a type is on the wire, which decides whether a stub's
// type and a provider's can meet: numbers convert into each other (the
// provider checks that no value is lost), a struct and a map are both
// objects, and any takes everything.
func class(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case t == "any":
		return "any"
	case t == "bool", t == "string":
		return t
	case t == "[]uint8", t == "[]byte":
		return "bytes"
	case strings.HasPrefix(t, "[]"), strings.HasPrefix(t, "["):
		return "list"
	case strings.HasPrefix(t, "map["):
		return "object"
	}
	for _, n := range []string{"int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64"} {
		if t == n {
			return "number"
		}
	}
	return "object"
}

func compatible(stub, provider string) bool {
	a, b := class(stub), class(provider)
	return a == b || a == "any" || b == "any"
}

// ErrContract is wrapped by CheckStub's errors.
var ErrContract = errors.New("contract mismatch")

// CheckStub compares the func fields of stub (as Refer fills them) with
// the signatures a provider published (KeySignatures on its URL). It
// returns nil when the URL carries none. Otherwise every stub method must
// exist on the provider, with as many arguments, each of a compatible kind
// (numbers with numbers, strings with strings, lists with lists, structs
// and maps with structs and maps; any with anything), and a compatible
// reply; service.EchoMethod (an embedded service.Echo) is always there.
// The error names each mismatch with the provider's shape of the method.
func CheckStub(stub any, provider *protocol.URL) error {
	raw := provider.Param(KeySignatures, "")
	if raw == "" {
		return nil
	}
	sigs, err := ParseSignatures(raw)
	if err != nil {
		return err
	}
	methods, err := StubMethods(stub)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(sigs))
	for n := range sigs {
		names = append(names, n)
	}
	slices.Sort(names)
	var problems []string
	for _, m := range methods {
		if m.Name == service.EchoMethod {
			continue // the protocol answers it for every service
		}
		ps, ok := sigs[m.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("the provider has no method %s%s (it has: %s)", m.Name, named.DidYouMean(m.Name, names), strings.Join(names, ", ")))
			continue
		}
		if len(m.Args) != len(ps.Args) {
			problems = append(problems, fmt.Sprintf("stub %s passes %d argument%s, the provider takes %d: %s",
				m.Name, len(m.Args), plural(len(m.Args)), len(ps.Args), ps.Shape()))
			continue
		}
		for i := range m.Args {
			if !compatible(m.Args[i], ps.Args[i]) {
				problems = append(problems, fmt.Sprintf("stub %s argument %d is %s, the provider expects %s: %s",
					m.Name, i+1, m.Args[i], ps.Args[i], ps.Shape()))
			}
		}
		switch {
		case m.Reply != "" && ps.Reply == "":
			problems = append(problems, fmt.Sprintf("stub %s expects a %s reply, the provider's returns only an error: %s", m.Name, m.Reply, ps.Shape()))
		case m.Reply != "" && !compatible(m.Reply, ps.Reply):
			problems = append(problems, fmt.Sprintf("stub %s expects a %s reply, the provider returns %s: %s", m.Name, m.Reply, ps.Reply, ps.Shape()))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s stub vs provider %s: %s", ErrContract, provider.Interface(), provider.Address(), strings.Join(problems, "; "))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// StubMethods returns the signatures of the func fields Refer would fill
// in stub (a pointer to a struct), by method name.
func StubMethods(stub any) ([]Signature, error) {
	pv := reflect.ValueOf(stub)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("proxy: stub must be a non-nil pointer to a struct, not %s", typeString(stub))
	}
	var out []Signature
	var walk func(st reflect.Type)
	walk = func(st reflect.Type) {
		for i := range st.NumField() {
			sf := st.Field(i)
			tag := sf.Tag.Get("dubbo")
			if tag == "-" {
				continue
			}
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct && sf.IsExported() {
				walk(sf.Type)
				continue
			}
			ft := sf.Type
			if !sf.IsExported() || ft.Kind() != reflect.Func || ft.NumIn() == 0 || ft.NumOut() == 0 {
				continue
			}
			name := sf.Name
			if tag != "" {
				name = tag
			}
			args := make([]reflect.Type, 0, ft.NumIn()-1)
			for j := 1; j < ft.NumIn(); j++ {
				args = append(args, ft.In(j))
			}
			var reply reflect.Type
			if ft.NumOut() == 2 {
				reply = ft.Out(0)
			}
			out = append(out, signatureOf(name, args, reply))
		}
	}
	walk(pv.Elem().Type())
	return out, nil
}
