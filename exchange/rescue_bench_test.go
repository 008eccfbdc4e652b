package exchange

import (
	"context"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/transport"
)

// BenchmarkRescueSlow is one look of the watcher of long runNear requests
// on a server with 1,000 connections, of which 10 ran a request on their
// reader lately and one runs one now: the watcher looks every millisecond
// while such a request runs.
func BenchmarkRescueSlow(b *testing.B) {
	s, err := NewServer(HandlerFunc(func(context.Context, *Request) (*transport.Buffer, error) { return nil, nil }), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// Runs that started "now" for the whole benchmark: none is rescued.
	now := time.Now().Add(time.Hour).UnixNano()
	for i := range 1000 {
		cs := &connState{}
		s.mu.Lock()
		s.conns[new(transport.Conn)] = cs
		s.mu.Unlock()
		if i < 10 {
			cs.nearSince.Store(now)
			if i == 0 {
				cs.unclaimed.Store(1)
			}
			s.listNear(cs)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if busy, _ := s.rescueSlow(); !busy {
			b.Fatal("no run seen")
		}
	}
}
