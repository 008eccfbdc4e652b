// Package named is the name table behind the framework's extension points
// (load balancers, cluster strategies): values registered by name, looked
// up with an error that lists the known names when a name is unknown.
package named

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Table maps names to values of type T. It is safe for concurrent use.
type Table[T any] struct {
	// pkg prefixes errors ("cluster"); noun, when set, names what the
	// table holds ("strategy"): `cluster: unknown strategy "x"`.
	pkg, noun string
	mu        sync.RWMutex
	m         map[string]T
}

// New returns a table holding builtin (copied); pkg and noun name the table
// in error messages (noun may be empty).
func New[T any](pkg, noun string, builtin map[string]T) *Table[T] {
	m := make(map[string]T, len(builtin))
	for k, v := range builtin {
		m[k] = v
	}
	if noun != "" {
		noun = " " + noun
	}
	return &Table[T]{pkg: pkg, noun: noun, m: m}
}

// Register adds v under name. It returns an error if name is empty or taken.
func (t *Table[T]) Register(name string, v T) error {
	if name == "" {
		return fmt.Errorf("%s: register%s: empty name", t.pkg, t.noun)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[name]; ok {
		return fmt.Errorf("%s: register%s %q: name already taken", t.pkg, t.noun, name)
	}
	t.m[name] = v
	return nil
}

// Get returns the value registered under name. An unknown name is an error
// that suggests the nearest name and lists Names(), e.g.
// `loadbalance: unknown "roundrobn"; did you mean "roundrobin"? (known: random, roundrobin)`.
func (t *Table[T]) Get(name string) (T, error) {
	t.mu.RLock()
	v, ok := t.m[name]
	t.mu.RUnlock()
	if !ok {
		names := t.Names()
		return v, fmt.Errorf("%s: unknown%s %q%s (known: %s)", t.pkg, t.noun, name, DidYouMean(name, names), strings.Join(names, ", "))
	}
	return v, nil
}

// Names returns the registered names, sorted.
func (t *Table[T]) Names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := make([]string, 0, len(t.m))
	for n := range t.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
