package config

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// WithProtocol adds a protocol by name, for protocols.<id>.name to choose
// (and for providers whose URLs have that scheme, name://host:port/...,
// to be referred with). The application makes one protocol of each name
// it uses with f, and closes it at Shutdown. The built-in protocol is
// dubbo.
func WithProtocol(name string, f protocol.Factory) Option {
	return func(a *Application) error { return a.protocols.Register(name, f) }
}

// Optional capabilities of a protocol, found by type assertion; each
// has a fallback.
type (
	// tlsExporter serves a port over TLS with a configuration of its own
	// (protocols.<id>.tls). Without it, a protocol with tls set is an error.
	tlsExporter interface {
		ExportTLS(inv protocol.Invoker, cfg *tls.Config) (protocol.Exporter, error)
	}
	// tlsReferrer calls providers over TLS with a reference's own
	// configuration. Without it, such a reference cannot call the
	// protocol's providers (the calls say why).
	tlsReferrer interface {
		ReferTLS(u *protocol.URL, cfg *tls.Config) (protocol.Invoker, error)
	}
	// shutdowner drains the calls in progress until ctx is done. Without
	// it, Shutdown closes the protocol at once.
	shutdowner interface {
		Shutdown(ctx context.Context) error
	}
	// abandoner counts the calls its shutdown gave up on. Without it, none.
	abandoner interface{ Abandoned() uint64 }
)

// protocols makes and keeps one protocol of each name an application
// uses, made on first use from the application's table. It is itself a
// protocol.Protocol that exports and refers each URL with the protocol of
// its scheme. Safe for concurrent use.
type protocols struct {
	table    *protocol.Table
	settings protocol.Settings // Logger is named per protocol

	mu     sync.Mutex
	m      map[string]protocol.Protocol
	order  []string // names in the order made, for Shutdown
	closed bool
}

var (
	_ protocol.Protocol = (*protocols)(nil)
	_ tlsExporter       = (*protocols)(nil)
	_ tlsReferrer       = (*protocols)(nil)
)

func newProtocols(t *protocol.Table, s protocol.Settings) *protocols {
	return &protocols{table: t, settings: s, m: map[string]protocol.Protocol{}}
}

// get returns the protocol of name, making it on first use.
func (ps *protocols) get(name string) (protocol.Protocol, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, fmt.Errorf("config: protocol %s: %w", name, status.ErrClosed)
	}
	if p, ok := ps.m[name]; ok {
		return p, nil
	}
	s := ps.settings
	s.Logger = s.Logger.Named(name)
	p, err := ps.table.New(name, s)
	if err != nil {
		return nil, err
	}
	ps.m[name] = p
	ps.order = append(ps.order, name)
	return p, nil
}

// Export exports inv with the protocol of its URL's scheme.
func (ps *protocols) Export(inv protocol.Invoker) (protocol.Exporter, error) {
	return ps.ExportTLS(inv, nil)
}

// ExportTLS exports inv with the protocol of its URL's scheme, over TLS
// with cfg when cfg is not nil.
func (ps *protocols) ExportTLS(inv protocol.Invoker, cfg *tls.Config) (protocol.Exporter, error) {
	name := inv.URL().Protocol
	p, err := ps.get(name)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return p.Export(inv)
	}
	te, ok := p.(tlsExporter)
	if !ok {
		return nil, fmt.Errorf("config: protocol %s does not speak TLS (it has no ExportTLS); remove the protocol's tls", name)
	}
	return te.ExportTLS(inv, cfg)
}

// Refer refers u with the protocol of its scheme.
func (ps *protocols) Refer(u *protocol.URL) (protocol.Invoker, error) {
	p, err := ps.get(u.Protocol)
	if err != nil {
		return nil, err
	}
	return p.Refer(u)
}

// ReferTLS refers u with the protocol of its scheme over TLS with cfg.
func (ps *protocols) ReferTLS(u *protocol.URL, cfg *tls.Config) (protocol.Invoker, error) {
	p, err := ps.get(u.Protocol)
	if err != nil {
		return nil, err
	}
	tr, ok := p.(tlsReferrer)
	if !ok {
		return nil, fmt.Errorf("config: protocol %s does not speak TLS (it has no ReferTLS)", u.Protocol)
	}
	return tr.ReferTLS(u, cfg)
}

// take marks the set closed and returns its protocols.
func (ps *protocols) take() []protocol.Protocol {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	out := make([]protocol.Protocol, 0, len(ps.order))
	for _, n := range ps.order {
		out = append(out, ps.m[n])
	}
	return out
}

// Shutdown drains every protocol (at once, until ctx is done) and closes
// it; no protocol is made after it.
func (ps *protocols) Shutdown(ctx context.Context) error {
	all := ps.take()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() {
			if s, ok := p.(shutdowner); ok {
				errs[i] = s.Shutdown(ctx)
			}
			errs[i] = errors.Join(errs[i], p.Close())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes every protocol at once; no protocol is made after it.
func (ps *protocols) Close() error {
	var errs []error
	for _, p := range ps.take() {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Abandoned sums the calls the protocols' shutdowns gave up on.
func (ps *protocols) Abandoned() uint64 {
	ps.mu.Lock()
	all := make([]protocol.Protocol, 0, len(ps.m))
	for _, p := range ps.m {
		all = append(all, p)
	}
	ps.mu.Unlock()
	var n uint64
	for _, p := range all {
		if a, ok := p.(abandoner); ok {
			n += a.Abandoned()
		}
	}
	return n
}

// protocolNames returns the names of the protocols the configuration's protocols
// use, sorted, for New to make them at start-up.
func (c *Config) protocolNames() []string {
	var names []string
	for _, p := range c.Protocols {
		if !slices.Contains(names, p.Name) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}
