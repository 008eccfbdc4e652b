package registry

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/internal/optcheck"
)

// Options are the settings an application gives every registry it opens.
// Each registry reads those it has a use for (an in-process registry has
// no session or credentials); settings of its own it reads from the
// address's parameters. Zero fields mean each registry's own default
// (registry/zookeeper's DefaultOptions, for example); negative ones are
// invalid (Validate), and Table.Open refuses them.
type Options struct {
	// Application names the process (in registered URLs, cache files).
	Application string
	// SessionTimeout is the session timeout of registries with sessions
	// (0: the registry's default).
	SessionTimeout time.Duration
	// Username and Password are credentials, both or neither.
	Username, Password string
	// CacheFile is where provider lists are kept on disk: "" for the
	// registry's default place, "-" for none.
	CacheFile string
	// Params are settings only one kind of registry has, by the names its
	// address takes them as parameters (for ZooKeeper, zookeeper.Params);
	// they win over the address's. A registry refuses a name it does not
	// know.
	Params map[string]string
	// Logger receives the registry's logs (nil: none).
	Logger *zap.Logger
}

// Validate returns an error naming the first invalid field: a negative
// timeout, or a Username without a Password (or the other way round).
func (o Options) Validate() error {
	if err := optcheck.NonNegative("registry",
		optcheck.Field{Name: "SessionTimeout", Value: int64(o.SessionTimeout), Default: optcheck.Said("the registry's default")},
	); err != nil {
		return err
	}
	if (o.Username == "") != (o.Password == "") {
		return errors.New("registry: Username and Password go together")
	}
	return nil
}

// Factory opens a registry for an address of the scheme it is registered
// under. The address is the whole string, scheme included.
type Factory func(address string, o Options) (Registry, error)

// DefaultScheme is the scheme of an address written without one
// ("10.0.0.1:2181"), as registry/zookeeper reads it.
const DefaultScheme = "zookeeper"

// Table maps address schemes to factories: the door by which registries,
// built-in or a user's own, are chosen from configuration. Safe for
// concurrent use.
type Table struct{ t *named.Table[Factory] }

// NewTable returns a table holding factories by scheme (copied).
func NewTable(factories map[string]Factory) *Table {
	return &Table{named.New("registry", "scheme", factories)}
}

// Register adds f for scheme. It returns an error if scheme is empty, f is
// nil or the scheme is taken.
func (t *Table) Register(scheme string, f Factory) error {
	if f == nil {
		return fmt.Errorf("registry: register scheme %q: nil factory", scheme)
	}
	return t.t.Register(scheme, f)
}

// Scheme returns the scheme of address: what comes before "://", or
// DefaultScheme when there is none.
func Scheme(address string) string {
	if s, _, ok := strings.Cut(address, "://"); ok {
		return s
	}
	return DefaultScheme
}

// Check returns an error, listing the known schemes, when address has a
// scheme no factory is registered for.
func (t *Table) Check(address string) error {
	_, err := t.t.Get(Scheme(address))
	return err
}

// Open opens a registry for address with the factory of its scheme;
// invalid o (see Options.Validate) is an error.
func (t *Table) Open(address string, o Options) (Registry, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f, err := t.t.Get(Scheme(address))
	if err != nil {
		return nil, err
	}
	r, err := f(address, o)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("registry: factory for %q returned nil", Scheme(address))
	}
	return r, nil
}

// Names returns the registered schemes, sorted.
func (t *Table) Names() []string { return t.t.Names() }
