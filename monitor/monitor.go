package monitor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// Side tells which end of a call a filter counts.
type Side string

// The two sides of a call.
const (
	Consumer Side = "consumer"
	Provider Side = "provider"
)

// Stat is a snapshot of the counts of one method of one service on one side.
// The counters are read one by one while calls go on, so Calls may be ahead
// of Successes+Failures+Concurrent by the calls that started meanwhile.
type Stat struct {
	Side                            Side
	Service, Version, Group, Method string
	// Calls is the number of calls started; Successes and Failures count
	// the calls that ended without and with an error (a business error is
	// a failure too).
	Calls, Successes, Failures int64
	// Elapsed is the total time of the ended calls; MaxElapsed the longest.
	Elapsed, MaxElapsed time.Duration
	// Concurrent is the number of calls in flight at the snapshot;
	// MaxConcurrent the most there have been at once.
	Concurrent, MaxConcurrent int64
}

// AvgElapsed returns the mean time of the ended calls, or 0.
func (s Stat) AvgElapsed() time.Duration {
	n := s.Successes + s.Failures
	if n == 0 {
		return 0
	}
	return s.Elapsed / time.Duration(n)
}

// String formats the stat on one line.
func (s Stat) String() string {
	return fmt.Sprintf("%s %s.%s calls=%d ok=%d fail=%d avg=%v max=%v concurrent=%d/%d",
		s.Side, protocol.ServiceKey(s.Service, s.Version, s.Group), s.Method,
		s.Calls, s.Successes, s.Failures, s.AvgElapsed(), s.MaxElapsed, s.Concurrent, s.MaxConcurrent)
}

type key struct {
	side                            Side
	service, version, group, method string
}

// counters are the live counts of one key, updated atomically.
type counters struct {
	calls, successes, failures atomic.Int64
	elapsed, maxElapsed        atomic.Int64 // nanoseconds
	concurrent, maxConcurrent  atomic.Int64
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// Monitor counts calls per side, service and method. Its filters, from
// Filter, may be put in any number of chains on both sides. A counted call
// costs a few atomic operations and a lookup in an immutable map, and
// allocates nothing once its method has been seen. A Monitor is safe for
// concurrent use.
type Monitor struct {
	mu      sync.Mutex // serializes writers of entries
	entries atomic.Pointer[map[key]*counters]
	now     func() time.Time
}

// New returns a Monitor with no counts.
func New() *Monitor {
	m := &Monitor{now: time.Now}
	empty := map[key]*counters{}
	m.entries.Store(&empty)
	return m
}

// Filter returns a filter that counts every call passing through it as a
// call on side.
func (m *Monitor) Filter(side Side) protocol.Filter { return &filter{m: m, side: side} }

// counters returns the counters of k, adding them on first use by copying
// the map (new methods are rare; lookups take no lock).
func (m *Monitor) counters(k key) *counters {
	if c, ok := (*m.entries.Load())[k]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.entries.Load()
	if c, ok := old[k]; ok {
		return c
	}
	next := make(map[key]*counters, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	c := &counters{}
	next[k] = c
	m.entries.Store(&next)
	return c
}

// Snapshot returns the counts of every side, service and method seen so
// far, sorted by service, version, group, method and side.
func (m *Monitor) Snapshot() []Stat {
	entries := *m.entries.Load()
	out := make([]Stat, 0, len(entries))
	for k, c := range entries {
		out = append(out, Stat{
			Side: k.side, Service: k.service, Version: k.version, Group: k.group, Method: k.method,
			Calls: c.calls.Load(), Successes: c.successes.Load(), Failures: c.failures.Load(),
			Elapsed: time.Duration(c.elapsed.Load()), MaxElapsed: time.Duration(c.maxElapsed.Load()),
			Concurrent: c.concurrent.Load(), MaxConcurrent: c.maxConcurrent.Load(),
		})
	}
	slices.SortFunc(out, func(a, b Stat) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Side, b.Side))
	})
	return out
}

type filter struct {
	m    *Monitor
	side Side
}

var _ protocol.Filter = (*filter)(nil)

// Invoke counts the call around next. A call that panics is counted as a
// failure and the panic goes on.
func (f *filter) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	c := f.m.counters(key{f.side, inv.Service, inv.Version, inv.Group, inv.Method})
	c.calls.Add(1)
	storeMax(&c.maxConcurrent, c.concurrent.Add(1))
	start := f.m.now()
	ended := false
	defer func() {
		if !ended {
			c.end(f.m.now().Sub(start), false)
		}
	}()
	res, err := next.Invoke(ctx, inv)
	ended = true
	c.end(f.m.now().Sub(start), err == nil)
	return res, err
}

func (c *counters) end(d time.Duration, ok bool) {
	if ok {
		c.successes.Add(1)
	} else {
		c.failures.Add(1)
	}
	c.elapsed.Add(int64(d))
	storeMax(&c.maxElapsed, int64(d))
	c.concurrent.Add(-1)
}
