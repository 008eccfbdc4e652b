package zookeeper

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// sub is one Subscribe call: a goroutine watches the providers (and, for a
// registry.RouterListener, another the routers) of one service.
type sub struct {
	consumer *protocol.URL
	key      string
	l        registry.Listener
	kick     chan struct{}
	done     chan struct{}
	stopped  bool
	// bad holds the malformed child names already reported, so each is
	// logged and counted once per subscription (only its goroutine uses it).
	bad map[string]struct{}
	// big is the size check's state (see guardedChildrenW); blamed is the
	// size of an oversized response blamed on this subscription's listing
	// in flight (guarded by Registry.mu).
	big    bigGuard
	blamed int
	// seen counts the providers of the interface last listed, of every
	// version and group (nil until the first listing), for Health.
	seen atomic.Pointer[[]registry.Registered]
}

// maxBadRemembered bounds sub.bad.
const maxBadRemembered = 1024

func (s *sub) stop() {
	if !s.stopped {
		s.stopped = true
		close(s.done)
	}
}

// Subscribe calls l with the providers of the service u names (interface,
// version, group; see registry.Match) now and after every change. It never
// blocks on ZooKeeper: when no session is up, l first gets the cached list
// (when the cache has one) and the real list once ZooKeeper answers. Calls
// to l come from one goroutine per subscription, in order.
func (r *Registry) Subscribe(u *protocol.URL, l registry.Listener) error {
	if err := validate(u); err != nil {
		return err
	}
	if l == nil {
		return errors.New("zookeeper registry: nil listener")
	}
	s := &sub{consumer: u, key: u.ServiceKey(), l: l, kick: make(chan struct{}, 1), done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.subs[s] = struct{}{}
	r.subWG.Go(func() { r.watchProviders(s) })
	if rl, ok := l.(registry.RouterListener); ok {
		rkick := make(chan struct{}, 1)
		rs := &sub{consumer: u, key: u.ServiceKey(), l: l, kick: rkick, done: s.done}
		r.subs[rs] = struct{}{}
		rs.stopped = true // shares done with s; s closes it
		r.subWG.Go(func() { r.watchRouters(rs, rl) })
	}
	return nil
}

// Unsubscribe stops calls to l for u. l must be comparable (a pointer,
// for example) to be found; unsubscribing what was not subscribed is not an
// error. It does not wait for a Notify in progress.
func (r *Registry) Unsubscribe(u *protocol.URL, l registry.Listener) error {
	if err := validate(u); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.subs {
		if s.consumer.String() == u.String() && sameListener(s.l, l) {
			s.stop()
			delete(r.subs, s)
		}
	}
	return nil
}

func sameListener(a, b registry.Listener) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// awaitFirstSession waits at most Options.RegisterWait for the registry's
// first session, or until s stops, or until every server has refused a
// connection (ZooKeeper is down: no session is coming soon). Waiting out
// RegisterWait then made a consumer started while ZooKeeper was down
// fail its first calls: config's Refer waits as long as RegisterWait for
// a first list, and on a loaded machine it gave up before the cached
// list came.
func (r *Registry) awaitFirstSession(s *sub) {
	t := time.NewTimer(r.opts.RegisterWait)
	defer t.Stop()
	select {
	case <-s.kick: // a session came; the watch loop below lists at once
	case <-t.C:
	case <-s.done:
	}
}

// allRefused reports whether every server in turn has refused a
// connection since the last one was taken: ZooKeeper is down. (The kick
// the event callback sends then may have come before a subscription.)
func (r *Registry) allRefused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusedRun > len(r.servers)
}

// servingFromCache says that a subscription gets its providers from the
// cache file for want of a session: at WARN for the first one of an outage
// (a consumer working from lists that may be stale should be seen by
// default), at INFO for the others, so that many references do not repeat
// it.
func (r *Registry) servingFromCache(key string, providers int) {
	r.mu.Lock()
	first := !r.cacheWarned
	r.cacheWarned = true
	r.mu.Unlock()
	fields := []zap.Field{zap.String("address", r.address), zap.String("service", key),
		zap.Int("providers", providers), zap.String("cache", r.cache.Path())}
	if !first {
		r.log.Info("zookeeper: no session; serving providers from the cache", fields...)
		return
	}
	r.log.Warn("zookeeper: no session; serving providers from the cache (the last lists seen, which may be stale: "+
		"is ZooKeeper running at the registry's address? Lists update once a session comes; "+
		"later services served from the cache in this outage are logged at INFO)", fields...)
}

// testHookEmptyHeld, when set (tests), is called with how much longer an
// empty provider list is held back (see peerRecovery).
var testHookEmptyHeld func(wait time.Duration)

// watchProviders keeps s's listener up to date with the providers node.
func (r *Registry) watchProviders(s *sub) {
	p := r.CategoryPath(s.consumer.Interface(), registry.CategoryProviders)
	var (
		last      []*protocol.URL
		delivered bool
	)
	notify := func(urls []*protocol.URL) {
		last, delivered = urls, true
		s.l.Notify(urls)
	}
	if _, _, _, up := r.ready(); !up && r.sessions.Load() == 0 && !r.allRefused() {
		// A registry that was just created is still connecting: a session
		// usually comes within milliseconds, and its list beats a cached
		// one that may name providers long gone.
		r.awaitFirstSession(s)
	}
	if _, _, _, up := r.ready(); !up {
		if urls, ok := r.cache.Load(s.key); ok {
			r.servingFromCache(s.key, len(urls))
			notify(registry.Filter(s.consumer, urls))
		}
	}
	backoff, bigBackoff := r.opts.RetryMin, r.opts.RetryMax
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var watch <-chan zk.Event
		if conn, _, graceFrom, up := r.ready(); up {
			kids, ch, err := r.guardedChildrenW(conn, s, p)
			switch {
			case errors.Is(err, errOversized):
				// Skipped: keep what the listener has; look at the node's
				// Stat again later, not at every kick's pace.
				watch = ch
				if !delivered {
					if urls, ok := r.cache.Load(s.key); ok {
						notify(registry.Filter(s.consumer, urls))
					}
				}
				retry.Reset(jitter(bigBackoff))
				bigBackoff = min(2*bigBackoff, max(r.opts.Resync, r.opts.RetryMax))
			case err != nil:
				select {
				case <-s.done: // closed meanwhile: not worth a warning
					return
				default:
				}
				r.log.Warn("zookeeper: list providers failed; will retry", zap.String("node", p), zap.Error(err))
				if !delivered {
					if urls, ok := r.cache.Load(s.key); ok {
						notify(registry.Filter(s.consumer, urls))
					}
				}
				retry.Reset(jitter(backoff))
				backoff = min(2*backoff, r.opts.RetryMax)
			default:
				r.checkACLs(conn, r.servicePath(s.consumer.Interface()), p)
				backoff, bigBackoff = r.opts.RetryMin, r.opts.RetryMax
				watch = ch
				urls := r.parseProviders(s, p, kids)
				if len(urls) == 0 && len(last) > 0 {
					if wait := r.opts.EmptyGrace - time.Since(graceFrom); wait > 0 {
						r.log.Info("zookeeper: empty provider list right after a (re)connect held back",
							zap.String("service", s.key), zap.Duration("for", wait))
						if testHookEmptyHeld != nil {
							testHookEmptyHeld(wait)
						}
						retry.Reset(wait)
						break
					}
				}
				if !delivered || !sameURLs(last, urls) {
					notify(urls)
				}
				// After the listeners: the file write (with its fsync) must
				// not delay a departed provider's removal.
				if err := r.cache.Store(s.key, urls); err != nil {
					r.log.Warn("zookeeper: provider cache", zap.Error(err))
				}
			}
		} else if !delivered {
			// No session: fall back to the cache if it was filled meanwhile.
			if urls, ok := r.cache.Load(s.key); ok {
				notify(registry.Filter(s.consumer, urls))
			}
		}
		select {
		case <-s.done:
			return
		case <-s.kick:
		case <-watch:
			r.watchFired(watch)
		case <-retry.C:
		}
	}
}

// watchRouters keeps a RouterListener up to date with the routers node.
func (r *Registry) watchRouters(s *sub, rl registry.RouterListener) {
	p := r.CategoryPath(s.consumer.Interface(), registry.CategoryRouters)
	var last []string
	delivered := false
	backoff, bigBackoff := r.opts.RetryMin, r.opts.RetryMax
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var watch <-chan zk.Event
		if conn, _, _, up := r.ready(); up {
			kids, ch, err := r.guardedChildrenW(conn, s, p)
			if errors.Is(err, errOversized) {
				watch = ch
				retry.Reset(jitter(bigBackoff))
				bigBackoff = min(2*bigBackoff, max(r.opts.Resync, r.opts.RetryMax))
			} else if err != nil {
				retry.Reset(jitter(backoff))
				backoff = min(2*backoff, r.opts.RetryMax)
			} else {
				r.checkACLs(conn, p)
				backoff, bigBackoff = r.opts.RetryMin, r.opts.RetryMax
				watch = ch
				kids = sortedStrings(kids)
				if !delivered || !equalStrings(last, kids) {
					last, delivered = kids, true
					urls := make([]*protocol.URL, 0, len(kids))
					for _, k := range kids {
						u, err := protocol.ParseURL(k)
						if err != nil {
							r.malformed.Add(1)
							r.log.Warn("zookeeper: malformed router node ignored", zap.String("node", p+"/"+k), zap.Error(err))
							continue
						}
						urls = append(urls, u)
					}
					rl.NotifyRouters(urls)
				}
			}
		}
		select {
		case <-s.done:
			return
		case <-s.kick:
		case <-watch:
			r.watchFired(watch)
		case <-retry.C:
		}
	}
}

// childrenW lists p and leaves a watch on it. A missing node is not
// created (a consumer of a service nobody provides must not leave empty
// nodes that make the service look provided): an existence watch stands
// in and the list is empty. A node created between the listing and the
// existence check is listed again with a child watch: an existence watch
// on a node that exists fires for its data or its deletion, never for its
// children, so the list would never be updated.
func (r *Registry) childrenW(conn *zk.Conn, p string) ([]string, <-chan zk.Event, error) {
	for range 3 {
		done := r.watchCall(conn, opGetChildren2, p)
		kids, _, ch, err := conn.ChildrenW(p)
		done(ch)
		if err == nil || !errors.Is(err, zk.ErrNoNode) {
			return kids, ch, err
		}
		done = r.watchCall(conn, opExists, p)
		ok, _, ech, err := conn.ExistsW(p)
		done(ech)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, ech, nil
		}
	}
	return nil, nil, fmt.Errorf("zookeeper registry: %s was created and deleted again while listed", p)
}

// parseProviders turns child names (at most MaxChildren of them, see
// guardedChildrenW) into provider URLs for s: malformed names skipped with
// a warning, then filtered by registry.Match.
func (r *Registry) parseProviders(s *sub, p string, kids []string) []*protocol.URL {
	kids = sortedStrings(kids)
	urls := make([]*protocol.URL, 0, len(kids))
	for _, k := range kids {
		u, err := protocol.ParseURL(k)
		if err == nil && (u.Host == "" || u.Port <= 0) {
			err = errors.New("provider URL without host:port")
		}
		if err != nil {
			if _, seen := s.bad[k]; !seen {
				if s.bad == nil {
					s.bad = map[string]struct{}{}
				}
				if len(s.bad) < maxBadRemembered {
					s.bad[k] = struct{}{}
				}
				r.malformed.Add(1)
				r.log.Warn("zookeeper: malformed provider node ignored", zap.String("node", p+"/"+k), zap.Error(err))
			}
			continue
		}
		urls = append(urls, u)
	}
	seen := registry.Summarize(urls)
	s.seen.Store(&seen)
	return registry.Filter(s.consumer, urls)
}

// Health reports the registry's address, whether a session is up, and
// what the last listing of consumer's interface held (every version and
// group), when a subscription to it has listed it.
func (r *Registry) Health(consumer *protocol.URL) registry.Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := registry.Health{Address: "zookeeper://" + r.address, Connected: r.hasSession, Since: r.lostAt}
	if r.hasSession {
		h.Since = r.upAt
	}
	if consumer == nil {
		return h
	}
	for s := range r.subs {
		if s.consumer.Interface() != consumer.Interface() {
			continue
		}
		if seen := s.seen.Load(); seen != nil {
			h.Listed, h.Registered = true, *seen
			break
		}
	}
	return h
}

func sameURLs(a, b []*protocol.URL) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
