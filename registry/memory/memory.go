// Package memory is an in-process registry.Registry, for tests and for
// providers and consumers that live in one process. It keeps registered
// URLs in maps and tells subscribers about changes at once.
//
//	reg := memory.New()
//	defer reg.Close()
//	_ = reg.Register(ctx, providerURL)
//	_ = reg.Subscribe(consumerURL, registry.ListenerFunc(func(ps []*protocol.URL) { ... }))
package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("memory registry: closed")

// Registry is an in-process registry. Subscribe delivers the current list
// at once and then every change, in order, from one goroutine per
// subscription. Safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	closed bool
	// urls[category][interface][url string] = url
	urls map[string]map[string]map[string]*protocol.URL
	subs map[*subscription]struct{}
	wg   sync.WaitGroup
}

var _ registry.Registry = (*Registry)(nil)

// New returns an empty registry.
func New() *Registry {
	return &Registry{urls: map[string]map[string]map[string]*protocol.URL{}, subs: map[*subscription]struct{}{}}
}

// subscription delivers lists to one listener from its own goroutine.
type subscription struct {
	consumer *protocol.URL
	l        registry.Listener

	mu      sync.Mutex
	queue   [][]*protocol.URL
	routers [][]*protocol.URL
	wake    chan struct{}
	done    chan struct{}
}

func (s *subscription) push(providers []*protocol.URL, routers bool) {
	s.mu.Lock()
	if routers {
		s.routers = append(s.routers, providers)
	} else {
		s.queue = append(s.queue, providers)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) run() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			q, rq := s.queue, s.routers
			s.queue, s.routers = nil, nil
			s.mu.Unlock()
			if len(q) == 0 && len(rq) == 0 {
				break
			}
			for _, list := range q {
				select {
				case <-s.done:
					return
				default:
				}
				s.l.Notify(list)
			}
			if rl, ok := s.l.(registry.RouterListener); ok {
				for _, list := range rq {
					rl.NotifyRouters(list)
				}
			}
		}
	}
}

func validate(u *protocol.URL) error {
	if u == nil {
		return errors.New("memory registry: nil URL")
	}
	if u.Interface() == "" {
		return fmt.Errorf("memory registry: URL %s names no interface", u)
	}
	return nil
}

// Register publishes u under its category (providers unless the URL says
// otherwise) until Unregister or Close.
func (r *Registry) Register(ctx context.Context, u *protocol.URL) error {
	if err := validate(u); err != nil {
		return err
	}
	return r.change(u, func(m map[string]*protocol.URL) { m[u.String()] = u })
}

// Unregister removes u; removing a URL that is not registered is not an error.
func (r *Registry) Unregister(ctx context.Context, u *protocol.URL) error {
	if err := validate(u); err != nil {
		return err
	}
	return r.change(u, func(m map[string]*protocol.URL) { delete(m, u.String()) })
}

func (r *Registry) change(u *protocol.URL, f func(map[string]*protocol.URL)) error {
	cat, iface := registry.CategoryOf(u), u.Interface()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	byIface := r.urls[cat]
	if byIface == nil {
		byIface = map[string]map[string]*protocol.URL{}
		r.urls[cat] = byIface
	}
	m := byIface[iface]
	if m == nil {
		m = map[string]*protocol.URL{}
		byIface[iface] = m
	}
	f(m)
	if cat != registry.CategoryProviders && cat != registry.CategoryRouters {
		return nil
	}
	for s := range r.subs {
		if s.consumer.Interface() == iface {
			s.push(r.listLocked(cat, s.consumer), cat == registry.CategoryRouters)
		}
	}
	return nil
}

// listLocked returns the URLs of category for consumer, sorted by String.
func (r *Registry) listLocked(cat string, consumer *protocol.URL) []*protocol.URL {
	m := r.urls[cat][consumer.Interface()]
	all := make([]*protocol.URL, 0, len(m))
	for _, u := range m {
		all = append(all, u)
	}
	slices.SortFunc(all, func(a, b *protocol.URL) int {
		if as, bs := a.String(), b.String(); as < bs {
			return -1
		} else if as > bs {
			return 1
		}
		return 0
	})
	if cat == registry.CategoryRouters {
		return all
	}
	return registry.Filter(consumer, all)
}

// Subscribe calls l with the providers of the service u names now and
// after every change, from a goroutine of its own.
func (r *Registry) Subscribe(u *protocol.URL, l registry.Listener) error {
	if err := validate(u); err != nil {
		return err
	}
	if l == nil {
		return errors.New("memory registry: nil listener")
	}
	s := &subscription{consumer: u, l: l, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.subs[s] = struct{}{}
	s.push(r.listLocked(registry.CategoryProviders, u), false)
	if _, ok := l.(registry.RouterListener); ok {
		s.push(r.listLocked(registry.CategoryRouters, u), true)
	}
	r.wg.Go(s.run)
	return nil
}

// Unsubscribe stops calls to l for u. Unsubscribing what was not
// subscribed is not an error.
func (r *Registry) Unsubscribe(u *protocol.URL, l registry.Listener) error {
	if err := validate(u); err != nil {
		return err
	}
	r.mu.Lock()
	var gone []*subscription
	for s := range r.subs {
		if s.consumer.String() == u.String() && sameListener(s.l, l) {
			delete(r.subs, s)
			gone = append(gone, s)
		}
	}
	r.mu.Unlock()
	for _, s := range gone {
		close(s.done)
	}
	return nil
}

// sameListener compares listeners, which may be uncomparable (a
// ListenerFunc): those never match.
func sameListener(a, b registry.Listener) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// Close stops every subscription and forgets every URL. It waits for the
// subscription goroutines to return and is idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for s := range r.subs {
		close(s.done)
	}
	r.subs = nil
	r.urls = nil
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// Health reports the registry as always connected, with the providers of
// consumer's interface (all versions and groups) counted.
func (r *Registry) Health(consumer *protocol.URL) registry.Health {
	h := registry.Health{Address: "memory://", Connected: true, Listed: consumer != nil}
	if consumer == nil {
		return h
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.urls[registry.CategoryProviders][consumer.Interface()]
	all := make([]*protocol.URL, 0, len(m))
	for _, u := range m {
		all = append(all, u)
	}
	h.Registered = registry.Summarize(all)
	return h
}

// Factory returns the registry.Factory of the memory scheme: memory://name
// opens the in-process registry called name, the same one for every
// address with that name opened through this factory (so one
// application's registries of one name are one registry), a new one for
// a new name. Close of any of them closes the shared registry.
func Factory() registry.Factory {
	var mu sync.Mutex
	byName := map[string]*Registry{}
	return func(address string, _ registry.Options) (registry.Registry, error) {
		name, ok := strings.CutPrefix(address, "memory://")
		if !ok {
			return nil, fmt.Errorf("memory registry: address %q: want memory://name", address)
		}
		mu.Lock()
		defer mu.Unlock()
		r, ok := byName[name]
		if !ok {
			r = New()
			byName[name] = r
		}
		return r, nil
	}
}
