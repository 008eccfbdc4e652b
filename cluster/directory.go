package cluster

import (
	"slices"

	"github.com/minidubbo/minidubbo/protocol"
)

// Snapshot is one version of a directory's provider list. It is immutable:
// a directory whose list changes publishes a new Snapshot, so that what
// routers and load balancers derive from one is built once and stays
// valid for as long as the snapshot is current.
type Snapshot struct {
	version  uint64
	invokers []protocol.Invoker
}

// NewSnapshot returns snapshot version of invokers, which it keeps: the
// caller must not modify the slice afterwards.
func NewSnapshot(version uint64, invokers []protocol.Invoker) *Snapshot {
	return &Snapshot{version: version, invokers: invokers}
}

// Version returns the version the directory gave the snapshot; a later
// snapshot of the same directory has a higher one.
func (s *Snapshot) Version() uint64 { return s.version }

// Invokers returns the providers, every one of them, whether its
// connection is up or not (the cluster invoker decides availability). The
// result must not be modified.
func (s *Snapshot) Invokers() []protocol.Invoker { return s.invokers }

// Directory publishes the providers a cluster invoker may call. The
// registry directory and Static implement it; cluster invokers call
// Snapshot once per call.
//
// Snapshot must be safe for concurrent use, must not block, and returns
// the same *Snapshot until the provider list changes (never nil).
type Directory interface {
	Snapshot() *Snapshot
}

// Static is a Directory over a fixed list of invokers.
type Static struct{ s *Snapshot }

var _ Directory = (*Static)(nil)

// NewStatic returns a directory that always lists invokers.
func NewStatic(invokers ...protocol.Invoker) *Static {
	return &Static{s: NewSnapshot(1, slices.Clone(invokers))}
}

// Snapshot implements Directory.
func (d *Static) Snapshot() *Snapshot { return d.s }
