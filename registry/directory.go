package registry

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/protocol"
)

// DefaultLinger is how long a departed invoker stays open even when idle.
const DefaultLinger = time.Second

// DefaultDrainTimeout bounds how long a departed provider's invoker is kept
// open for the calls still running on it.
const DefaultDrainTimeout = 10 * time.Second

// DirectoryOptions configure a Directory. As in every layer's options:
// every zero field means the default (DefaultDirectoryOptions shows them);
// a negative field is invalid (Validate). Off is said with a field of its
// own (NoEmptyProtection), never with a number.
type DirectoryOptions struct {
	// Consumer names the service (interface, version, group) whose
	// providers the directory keeps; providers that do not Match it are
	// ignored. Required.
	Consumer *protocol.URL
	// Protocol refers provider URLs as invokers. Required.
	Protocol protocol.Protocol
	// Wrap, when set, is applied to every invoker Protocol returns (for
	// example to add consumer-side filters with protocol.Chain).
	Wrap func(protocol.Invoker) protocol.Invoker
	// DrainTimeout bounds the wait for in-flight calls on a provider that
	// left the list before its invoker is closed (default
	// DefaultDrainTimeout, 10 s).
	DrainTimeout time.Duration
	// Linger is how long a departed provider's invoker stays open even when
	// no call runs on it, for calls that picked it from an earlier snapshot
	// but have not started yet (default DefaultLinger, 1 s; at most
	// DrainTimeout).
	Linger time.Duration
	// NoEmptyProtection turns empty protection off: an empty provider
	// list then empties the directory at once, as Dubbo does by default.
	//
	// With empty protection (the default, Dubbo's
	// enable-empty-protection), an empty list from the registry while
	// providers of the last list still have healthy connections keeps
	// those providers in use (logged, counted by EmptyProtected, listed by
	// Protected) until their connections fail or a non-empty list comes:
	// a registry glitch, or every node deleted by mistake, does not stop
	// calls that the providers could still answer.
	NoEmptyProtection bool
	// ProtectCheck is how often a protected provider's connection is
	// checked; one that failed is dropped (default DefaultProtectCheck,
	// 1 s).
	ProtectCheck time.Duration
	// Logger receives refer failures (warn) and provider-list changes
	// (info) (default none).
	Logger *zap.Logger
}

// DefaultProtectCheck is the default of DirectoryOptions.ProtectCheck.
const DefaultProtectCheck = time.Second

// DefaultDirectoryOptions returns the defaults of every field (Consumer
// and Protocol are required; Wrap and Logger nil: none).
func DefaultDirectoryOptions() DirectoryOptions {
	return DirectoryOptions{
		DrainTimeout: DefaultDrainTimeout,
		Linger:       DefaultLinger,
		ProtectCheck: DefaultProtectCheck,
	}
}

// Validate returns an error naming the first invalid field: a missing
// Consumer or Protocol, or a negative duration.
func (o DirectoryOptions) Validate() error {
	switch {
	case o.Consumer == nil:
		return errors.New("registry: directory needs a consumer URL (DirectoryOptions.Consumer)")
	case o.Protocol == nil:
		return errors.New("registry: directory needs a protocol (DirectoryOptions.Protocol)")
	}
	return optcheck.NonNegative("registry",
		optcheck.Field{Name: "DrainTimeout", Value: int64(o.DrainTimeout), Default: DefaultDrainTimeout},
		optcheck.Field{Name: "Linger", Value: int64(o.Linger), Default: DefaultLinger},
		optcheck.Field{Name: "ProtectCheck", Value: int64(o.ProtectCheck), Default: DefaultProtectCheck},
	)
}

// Directory is the registry directory: a Listener that turns provider
// lists into invokers, and a cluster.Directory that publishes them to the
// cluster layer as immutable, versioned snapshots (one per change).
//
// On every list it reuses the invokers of providers still present (keyed by
// the provider URL), refers new ones, and retires departed ones: a retired
// invoker is in no later snapshot, stays open for Linger for calls that
// picked it from an earlier one, and is then closed as soon as no call
// runs on it, or at the latest after DrainTimeout. An empty list empties
// the directory (registries deliver one only when the registry really
// reports no providers); a non-empty list of which no provider could be
// referred is ignored and the old invokers are kept.
//
// A snapshot lists every invoker, whether its connection is up or not:
// the cluster invoker is the one that decides availability.
//
// A Directory is safe for concurrent use.
type Directory struct {
	opts DirectoryOptions
	log  *zap.Logger

	snap atomic.Pointer[cluster.Snapshot]

	mu       sync.Mutex // serializes Notify and Close
	version  uint64     // of the last snapshot
	closed   bool
	byKey    map[string]*tracked
	rmu      sync.Mutex // guards retiring; never held while closing an invoker
	retiring map[*tracked]struct{}
	changed  chan struct{}
	ready    chan struct{}
	readyOK  bool

	protecting     bool          // the invokers are kept by empty protection
	protectStop    chan struct{} // closed to stop the protection check
	protectWg      sync.WaitGroup
	emptyProtected atomic.Uint64
	shuttingDown   atomic.Bool // see ShuttingDown
}

var (
	_ cluster.Directory = (*Directory)(nil)
	_ Listener          = (*Directory)(nil)
)

// NewDirectory returns an empty directory; subscribe it to a registry to
// fill it.
func NewDirectory(o DirectoryOptions) (*Directory, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	def := DefaultDirectoryOptions()
	if o.DrainTimeout == 0 {
		o.DrainTimeout = def.DrainTimeout
	}
	if o.Linger == 0 {
		o.Linger = def.Linger
	}
	o.Linger = min(o.Linger, o.DrainTimeout)
	if o.ProtectCheck == 0 {
		o.ProtectCheck = def.ProtectCheck
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	d := &Directory{
		opts:     o,
		log:      o.Logger.Named("directory"),
		byKey:    map[string]*tracked{},
		retiring: map[*tracked]struct{}{},
		changed:  make(chan struct{}),
		ready:    make(chan struct{}),
	}
	d.snap.Store(cluster.NewSnapshot(0, nil))
	return d, nil
}

// Snapshot implements cluster.Directory: the current invokers, the same
// *Snapshot until the next change. It neither blocks nor allocates.
func (d *Directory) Snapshot() *cluster.Snapshot { return d.snap.Load() }

// Changed returns a channel that is closed when the next snapshot is
// published, so tests and callers can wait for a change without polling.
func (d *Directory) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// WaitReady waits until the first provider list arrived (it may be empty).
func (d *Directory) WaitReady(ctx context.Context) error {
	select {
	case <-d.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify implements Listener: it makes the snapshot match providers.
func (d *Directory) Notify(providers []*protocol.URL) {
	urls := Filter(d.opts.Consumer, providers)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if len(urls) == 0 && d.protectEmpty() {
		d.markReady()
		return
	}
	d.stopProtecting()
	next := make(map[string]*tracked, len(urls))
	for _, u := range urls {
		key := u.String()
		if t, ok := d.byKey[key]; ok {
			next[key] = t
			continue
		}
		inv, err := d.opts.Protocol.Refer(u)
		if err != nil {
			d.log.Warn("refer provider failed; skipped", zap.String("provider", u.String()), zap.Error(err))
			continue
		}
		if d.opts.Wrap != nil {
			inv = d.opts.Wrap(inv)
		}
		next[key] = newTracked(inv)
	}
	if len(urls) > 0 && len(next) == 0 && len(d.byKey) > 0 {
		d.log.Warn("no provider of the new list could be referred; keeping the old ones",
			zap.Int("listed", len(urls)), zap.Int("kept", len(d.byKey)))
		d.markReady()
		return
	}
	var added, removed []string
	for key, t := range d.byKey {
		if _, ok := next[key]; !ok {
			removed = append(removed, t.URL().Address())
			d.retire(t, d.opts.Linger)
		}
	}
	for key, t := range next {
		if _, ok := d.byKey[key]; !ok {
			added = append(added, t.URL().Address())
		}
	}
	if len(added)+len(removed) > 0 || !d.readyOK {
		// An address both added and removed had its URL changed (a new
		// weight, say).
		var changed []string
		for _, a := range added {
			if slices.Contains(removed, a) {
				changed = append(changed, a)
			}
		}
		in := func(l []string) func(string) bool {
			return func(a string) bool { return slices.Contains(l, a) }
		}
		added = slices.DeleteFunc(added, in(changed))
		removed = slices.DeleteFunc(removed, in(changed))
		slices.Sort(added)
		slices.Sort(removed)
		slices.Sort(changed)
		d.log.Info("provider list changed", zap.String("service", d.opts.Consumer.ServiceKey()),
			zap.Int("providers", len(next)), zap.Strings("added", added), zap.Strings("removed", removed), zap.Strings("changed", changed))
	}
	d.install(next)
	d.markReady()
}

// install makes next the provider set: it publishes its invokers, sorted
// by key, as a new snapshot and wakes whoever waits for a change. d.mu
// must be held.
func (d *Directory) install(next map[string]*tracked) {
	d.byKey = next
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	invs := make([]protocol.Invoker, len(keys))
	for i, k := range keys {
		invs[i] = next[k]
	}
	d.publish(invs)
	close(d.changed)
	d.changed = make(chan struct{})
}

// ShuttingDown tells d that its application is shutting down. The
// providers that leave its list from then on are mostly the application's
// own (one that consumes a service it exports sees its providers
// unregister first): empty protection then logs at info instead of warn,
// with shutting_down true. It acts the same.
func (d *Directory) ShuttingDown() { d.shuttingDown.Store(true) }

// warn logs msg at warn level, or at info once the application is shutting
// down (ShuttingDown).
func (d *Directory) warn(msg string, fields ...zap.Field) {
	if d.shuttingDown.Load() {
		d.log.Info(msg, append(fields, zap.Bool("shutting_down", true))...)
		return
	}
	d.log.Warn(msg, fields...)
}

// protectEmpty applies empty protection to an empty list: it keeps the
// invokers whose connections are healthy, drops the others, and reports
// whether it kept any. d.mu must be held.
func (d *Directory) protectEmpty() bool {
	if d.opts.NoEmptyProtection || len(d.byKey) == 0 {
		return false
	}
	last := len(d.byKey)
	kept := d.keepHealthy()
	if len(kept) == 0 {
		if d.protecting {
			d.warn("empty protection ends: no protected provider is healthy", zap.String("service", d.opts.Consumer.ServiceKey()))
		} else {
			d.warn("the registry lists no provider and no connection of the last list is healthy; the provider list is empty",
				zap.String("service", d.opts.Consumer.ServiceKey()), zap.Int("last", last))
		}
		return false
	}
	d.emptyProtected.Add(1)
	d.warn("the registry lists no provider; keeping the healthy connections of the last list (empty protection)",
		zap.String("service", d.opts.Consumer.ServiceKey()), zap.Strings("kept", kept))
	if !d.protecting {
		d.protecting = true
		d.protectStop = make(chan struct{})
		stop := d.protectStop
		d.protectWg.Go(func() { d.checkProtected(stop) })
	}
	return true
}

// keepHealthy retires the invokers that are not available and publishes
// the rest if that changed anything; it returns the addresses kept. d.mu
// must be held.
func (d *Directory) keepHealthy() []string {
	var kept []string
	next := make(map[string]*tracked, len(d.byKey))
	for key, t := range d.byKey {
		if t.Available() {
			next[key] = t
			kept = append(kept, t.URL().Address())
		}
	}
	if len(kept) == 0 {
		return nil
	}
	slices.Sort(kept)
	if len(next) == len(d.byKey) {
		return kept
	}
	for key, t := range d.byKey {
		if _, ok := next[key]; !ok {
			d.retire(t, d.opts.Linger)
		}
	}
	d.install(next)
	return kept
}

// checkProtected drops protected providers whose connections failed, and
// empties the directory when none is left.
func (d *Directory) checkProtected(stop chan struct{}) {
	t := time.NewTicker(d.opts.ProtectCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		if !d.protecting || d.closed {
			d.mu.Unlock()
			return
		}
		if len(d.keepHealthy()) == 0 {
			d.warn("empty protection ends: no protected provider is healthy; the provider list is empty",
				zap.String("service", d.opts.Consumer.ServiceKey()))
			d.protecting = false
			close(d.protectStop)
			for _, tr := range d.byKey {
				d.retire(tr, d.opts.Linger)
			}
			d.byKey = map[string]*tracked{}
			d.publish(nil)
			close(d.changed)
			d.changed = make(chan struct{})
		}
		d.mu.Unlock()
	}
}

// stopProtecting ends empty protection; d.mu must be held.
func (d *Directory) stopProtecting() {
	if d.protecting {
		d.protecting = false
		close(d.protectStop)
	}
}

// EmptyProtected returns how many empty provider lists empty protection
// has overridden.
func (d *Directory) EmptyProtected() uint64 { return d.emptyProtected.Load() }

// Protected returns the addresses of the providers kept by empty
// protection now (none when the directory follows the registry).
func (d *Directory) Protected() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.protecting {
		return nil
	}
	out := make([]string, 0, len(d.byKey))
	for _, t := range d.byKey {
		out = append(out, t.URL().Address())
	}
	slices.Sort(out)
	return out
}

// publish makes invs the next snapshot; d.mu must be held.
func (d *Directory) publish(invs []protocol.Invoker) {
	d.version++
	d.snap.Store(cluster.NewSnapshot(d.version, invs))
}

func (d *Directory) markReady() {
	if !d.readyOK {
		d.readyOK = true
		close(d.ready)
	}
}

// retire takes t out of service; d.mu must be held.
func (d *Directory) retire(t *tracked, linger time.Duration) {
	d.rmu.Lock()
	d.retiring[t] = struct{}{}
	d.rmu.Unlock()
	t.retire(linger, d.opts.DrainTimeout, func() {
		d.rmu.Lock()
		delete(d.retiring, t)
		d.rmu.Unlock()
	})
}

// Retiring returns how many departed invokers still wait for their calls
// to finish.
func (d *Directory) Retiring() int {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	return len(d.retiring)
}

// Close retires every invoker, waits (at most DrainTimeout) for the calls
// running on them, closes them, and ignores later lists. It is idempotent.
func (d *Directory) Close() error { return d.CloseContext(context.Background()) }

// CloseContext is Close whose wait for the calls running also ends when
// ctx is done, for a shutdown with a deadline: what still runs then is
// closed at once (its calls fail with a connection-closed error).
func (d *Directory) CloseContext(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.stopProtecting()
	for _, t := range d.byKey {
		d.retire(t, 0)
	}
	d.byKey = map[string]*tracked{}
	d.publish(nil)
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	d.protectWg.Wait()
	d.rmu.Lock()
	all := make([]*tracked, 0, len(d.retiring))
	for t := range d.retiring {
		all = append(all, t)
	}
	d.rmu.Unlock()
	deadline := time.NewTimer(d.opts.DrainTimeout)
	defer deadline.Stop()
	for _, t := range all {
		select {
		case <-t.closed:
		case <-deadline.C:
		case <-ctx.Done():
		}
		select {
		case <-t.closed:
		default:
			for _, r := range all {
				r.closeNow()
			}
			return nil
		}
	}
	return nil
}

// tracked wraps an invoker, counting the calls in flight so a retired
// invoker is closed when the last one finishes.
type tracked struct {
	protocol.Invoker
	inflight atomic.Int64
	retired  atomic.Bool
	settled  atomic.Bool // retired and past the settle period

	once   sync.Once
	closed chan struct{}
	mu     sync.Mutex
	timer  *time.Timer
	onDone func()
}

func newTracked(inv protocol.Invoker) *tracked {
	return &tracked{Invoker: inv, closed: make(chan struct{})}
}

// Invoke counts the call in flight around the wrapped invoker's Invoke.
func (t *tracked) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	t.inflight.Add(1)
	defer func() {
		if t.inflight.Add(-1) == 0 && t.settled.Load() {
			t.closeNow()
		}
	}()
	return t.Invoker.Invoke(ctx, inv)
}

// Available reports the wrapped invoker's availability; a retired invoker
// is not available.
func (t *tracked) Available() bool {
	return !t.retired.Load() && protocol.IsAvailable(t.Invoker)
}

// Unwrap returns the wrapped invoker.
func (t *tracked) Unwrap() protocol.Invoker { return t.Invoker }

// InFlight returns the number of calls running on the invoker.
func (t *tracked) InFlight() int64 { return t.inflight.Load() }

// retire closes t after settle once no call runs on it, or after drain
// at the latest; onDone runs after closing.
func (t *tracked) retire(settle, drain time.Duration, onDone func()) {
	t.mu.Lock()
	t.onDone = onDone
	t.retired.Store(true)
	t.timer = time.AfterFunc(settle, func() {
		t.settled.Store(true)
		if t.inflight.Load() == 0 {
			t.closeNow()
			return
		}
		t.mu.Lock()
		t.timer = time.AfterFunc(drain-settle, t.closeNow)
		t.mu.Unlock()
	})
	t.mu.Unlock()
}

// closeNow closes the wrapped invoker once.
func (t *tracked) closeNow() {
	t.once.Do(func() {
		t.mu.Lock()
		if t.timer != nil {
			t.timer.Stop()
		}
		onDone := t.onDone
		t.mu.Unlock()
		if c, ok := t.Invoker.(io.Closer); ok {
			_ = c.Close()
		}
		close(t.closed)
		if onDone != nil {
			onDone()
		}
	})
}
