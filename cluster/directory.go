package cluster

import "github.com/minidubbo/minidubbo/protocol"

// Directory lists the invokers a call may go to. The registry directory and
// Static implement it; cluster invokers call it once per call.
//
// List must be safe for concurrent use, must not block, and returns an
// immutable snapshot that the caller must not modify.
type Directory interface {
	List(inv *protocol.Invocation) ([]protocol.Invoker, error)
}

// Static is a Directory over a fixed list of invokers.
type Static []protocol.Invoker

// List implements Directory.
func (s Static) List(*protocol.Invocation) ([]protocol.Invoker, error) { return s, nil }
