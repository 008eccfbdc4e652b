package registry

import (
	"context"

	"github.com/minidubbo/minidubbo/protocol"
)

// Registry publishes provider and consumer URLs and tells subscribers about
// the providers of a service. registry/zookeeper and registry/memory
// implement it. Implementations must be safe for concurrent use.
type Registry interface {
	// Register publishes u until Unregister or Close; registrations survive
	// reconnects and session loss.
	Register(ctx context.Context, u *protocol.URL) error
	// Unregister removes u.
	Unregister(ctx context.Context, u *protocol.URL) error
	// Subscribe calls l with the complete provider list of the service u
	// names (interface, version, group) now and after every change.
	Subscribe(u *protocol.URL, l Listener) error
	// Unsubscribe stops calls to l for u.
	Unsubscribe(u *protocol.URL, l Listener) error
	// Close unregisters everything and releases the connection.
	Close() error
}

// Listener receives provider lists. Notify gets the complete list, never a
// delta; calls for one subscription come from one goroutine, in order, and
// must not block for long.
type Listener interface {
	Notify(providers []*protocol.URL)
}

// ListenerFunc adapts a function to a Listener.
type ListenerFunc func(providers []*protocol.URL)

// Notify implements Listener.
func (f ListenerFunc) Notify(providers []*protocol.URL) { f(providers) }
