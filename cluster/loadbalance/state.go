package loadbalance

import (
	"sync"
	"sync/atomic"

	"github.com/minidubbo/minidubbo/protocol"
)

// methodKey identifies the per-method state of stateful balancers.
type methodKey struct {
	service, version, group, method string
}

func keyOf(inv *protocol.Invocation) methodKey {
	if inv == nil {
		return methodKey{}
	}
	return methodKey{inv.Service, inv.Version, inv.Group, inv.Method}
}

type slot[T any] struct {
	v    *T
	used atomic.Int64 // unix ms
}

// perMethod keeps one *T per service and method. Lookups read an
// immutable map through an atomic pointer (no lock); adding a key copies
// the map under a mutex and recycles keys idle for RecyclePeriod, so the
// map cannot grow without bound.
type perMethod[T any] struct {
	m         atomic.Pointer[map[methodKey]*slot[T]]
	mu        sync.Mutex
	lastSweep int64
	newT      func() *T
}

func (p *perMethod[T]) get(inv *protocol.Invocation, nowMs int64) *T {
	k := keyOf(inv)
	if m := p.m.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			if s.used.Load() != nowMs {
				s.used.Store(nowMs)
			}
			return s.v
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.m.Load()
	if old != nil {
		if s, ok := (*old)[k]; ok {
			return s.v
		}
	}
	sweep := nowMs-p.lastSweep >= RecyclePeriod.Milliseconds()
	if sweep {
		p.lastSweep = nowMs
	}
	var n map[methodKey]*slot[T]
	if old == nil {
		n = map[methodKey]*slot[T]{}
	} else {
		n = make(map[methodKey]*slot[T], len(*old)+1)
		cutoff := nowMs - RecyclePeriod.Milliseconds()
		for kk, s := range *old {
			if sweep && s.used.Load() < cutoff {
				continue
			}
			n[kk] = s
		}
	}
	s := &slot[T]{v: p.newT()}
	s.used.Store(nowMs)
	n[k] = s
	p.m.Store(&n)
	return s.v
}

// len returns the number of keys held.
func (p *perMethod[T]) len() int {
	if m := p.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}
