package protocol

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/serialize"
)

// Settings are what an application gives every protocol it makes. A
// protocol reads those it has a use for; settings of its own come with its
// factory (config.WithProtocolOptions for dubbo, a closure for a user's).
type Settings struct {
	// Serializers are the serializations services and references may name
	// (never nil when the application makes the protocol).
	Serializers *serialize.Table
	// Logger receives the protocol's logs, named after it (never nil when
	// the application makes the protocol).
	Logger *zap.Logger
}

// Factory makes a protocol. An application calls it at most once per
// protocol name, and closes the protocol when it shuts down.
type Factory func(s Settings) (Protocol, error)

// Table maps protocol names (the scheme of the URLs a protocol exports
// and refers, such as "dubbo") to factories: the door by which protocols,
// built-in or a user's own, are chosen from configuration. Safe for
// concurrent use.
type Table struct{ t *named.Table[Factory] }

// NewTable returns a table holding factories by name (copied).
func NewTable(factories map[string]Factory) *Table {
	return &Table{named.New("protocol", "", factories)}
}

// Register adds f under name. It returns an error if name is empty, f is
// nil or the name is taken.
func (t *Table) Register(name string, f Factory) error {
	if f == nil {
		return fmt.Errorf("protocol: register %q: nil factory", name)
	}
	return t.t.Register(name, f)
}

// New makes the protocol registered under name. An unknown name is an
// error that lists Names(), e.g. `protocol: unknown "dubo"; did you mean
// "dubbo"? (known: dubbo)`.
func (t *Table) New(name string, s Settings) (Protocol, error) {
	f, err := t.t.Get(name)
	if err != nil {
		return nil, err
	}
	p, err := f(s)
	if err != nil {
		return nil, fmt.Errorf("protocol %s: %w", name, err)
	}
	if p == nil {
		return nil, errors.New("protocol: factory for " + name + " returned nil")
	}
	return p, nil
}

// Check returns the error New would for an unknown name, or nil.
func (t *Table) Check(name string) error {
	_, err := t.t.Get(name)
	return err
}

// Names returns the registered names, sorted.
func (t *Table) Names() []string { return t.t.Names() }
