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

// maxKept bounds the attachment maps a server's interner keeps whole.
const maxKept = 64

// interner holds the strings every request head repeats, so that decoding
// them allocates nothing: the names of the exported services, versions,
// groups and methods, the framework's attachment keys, and the first
// maxLearned calling applications' names. Lookups read an immutable map
// through an atomic pointer; writers copy it under mu. It implements
// serialize.Interner.
//
// It also keeps whole attachment maps (serialize.MapInterner): the first
// maxKept maps whose keys are all the framework's, the token excepted, and
// whose values it holds (the calling application's name), by their
// encoding. A call that carries only such attachments then decodes them
// into a map shared with the calls before it, which nobody modifies
// (protocol.Invocation.Attachments).
type interner struct {
	m    atomic.Pointer[map[string]string]
	kept atomic.Pointer[map[string]map[string]string]

	mu      sync.Mutex
	static  map[string]string
	learned map[string]string
}

var _ serialize.MapInterner = (*interner)(nil)

func newInterner() *interner {
	in := &interner{learned: map[string]string{}}
	in.set(nil)
	in.kept.Store(&map[string]map[string]string{})
	return in
}

// InternMap implements serialize.MapInterner.
func (in *interner) InternMap(enc []byte) map[string]string {
	if in == nil {
		return nil
	}
	return (*in.kept.Load())[string(enc)]
}

// KeepMap implements serialize.MapInterner.
func (in *interner) KeepMap(enc []byte, m map[string]string) {
	if in == nil || len(*in.kept.Load()) >= maxKept {
		return
	}
	known := *in.m.Load()
	for k, v := range m {
		if k == protocol.KeyToken || !protocol.IsFrameworkKey(k) {
			return
		}
		if _, ok := known[v]; !ok {
			return
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	old := *in.kept.Load()
	if len(old) >= maxKept {
		return
	}
	if _, ok := old[string(enc)]; ok {
		return
	}
	kept := make(map[string]map[string]string, len(old)+1)
	for k, v := range old {
		kept[k] = v
	}
	kept[string(enc)] = m
	in.kept.Store(&kept)
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
