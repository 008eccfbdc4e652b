package dubbo

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
)

// maxLearned bounds the attachment values a server's interner learns from
// requests (calling applications' names), so that strangers cannot grow it.
const maxLearned = 64

// interner holds the strings every request head repeats, so that decoding
// them allocates nothing: the names of the exported services, versions,
// groups and methods, the framework's attachment keys, and the first
// maxLearned calling applications' names. Lookups read an immutable map
// through an atomic pointer; writers copy it under mu. It implements
// serialize.Interner.
type interner struct {
	m atomic.Pointer[map[string]string]

	mu      sync.Mutex
	static  map[string]string
	learned map[string]string
}

var _ serialize.Interner = (*interner)(nil)

func newInterner() *interner {
	in := &interner{learned: map[string]string{}}
	in.set(nil)
	return in
}

// Intern implements serialize.Interner.
func (in *interner) Intern(b []byte, key string) string {
	if in == nil {
		return string(b)
	}
	if s, ok := (*in.m.Load())[string(b)]; ok {
		return s
	}
	if key == protocol.KeyRemoteApplication {
		return in.learn(b)
	}
	return string(b)
}

// learn returns b as a string, kept for the next requests while fewer than
// maxLearned are kept.
func (in *interner) learn(b []byte) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := (*in.m.Load())[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in.learned) < maxLearned {
		in.learned[s] = s
		in.publishLocked()
	}
	return s
}

// set replaces the strings of the exported services.
func (in *interner) set(services map[string]*exported) {
	st := map[string]string{}
	add := func(s string) {
		if s != "" {
			st[s] = s
		}
	}
	for _, k := range [...]string{protocol.KeyToken, protocol.KeyRemoteApplication, service.EchoMethod} {
		add(k)
	}
	for _, e := range services {
		for _, s := range e.names {
			add(s)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.static = st
	in.publishLocked()
}

func (in *interner) publishLocked() {
	m := make(map[string]string, len(in.static)+len(in.learned))
	for k, v := range in.learned {
		m[k] = v
	}
	for k, v := range in.static {
		m[k] = v
	}
	in.m.Store(&m)
}

// exportedNames returns the strings requests for the service at u carry:
// its interface, version, group, and the names of its methods (with the
// first letter in lower case too, as Java consumers send them).
func exportedNames(u *protocol.URL, inv protocol.Invoker) []string {
	names := []string{u.Interface(), u.Version(), u.Group()}
	for _, m := range methodsOf(inv) {
		names = append(names, m)
		if r, n := utf8.DecodeRuneInString(m); unicode.IsUpper(r) {
			names = append(names, string(unicode.ToLower(r))+m[n:])
		}
	}
	return names
}

// methodsOf finds the method names of an exported invoker (an invoker with
// a Methods method at the end of a chain of wrappers), or the URL's
// methods parameter.
func methodsOf(inv protocol.Invoker) []string {
	cur := inv
	for range 64 {
		if m, ok := cur.(interface{ Methods() []string }); ok {
			return m.Methods()
		}
		u, ok := cur.(interface{ Unwrap() protocol.Invoker })
		if !ok {
			break
		}
		cur = u.Unwrap()
	}
	if ms := inv.URL().Param(protocol.KeyMethods, ""); ms != "" {
		return strings.Split(ms, ",")
	}
	return nil
}
