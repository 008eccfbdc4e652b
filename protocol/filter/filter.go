// Package filter holds the framework's built-in filters, each a small
// protocol.Filter type that config places in the chains it builds:
//
//	provider:  Count → Executes → user filters → service
//	consumer:  call filters (Count, user) → cluster → attempt filters (Count, TokenAttach, user) → provider
//
// Count tells a Recorder when each call starts and ends; config gives it
// the monitor's (package monitor counts, this package filters).
// Call filters run once per call, above the cluster (retries included);
// attempt filters run once per provider attempt, below it. Users add their
// own with config.WithFilters or by name from YAML (config.WithFilter).
// The provider's token is no filter: the protocol checks it before any
// argument is decoded.
package filter

import (
	"context"
	"fmt"
	"maps"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// TokenAttach adds, on the consumer, the token of the provider an attempt
// goes to (from its URL) to the call's attachments, without touching the
// caller's map. It is an attempt filter: each provider has its own token.
type TokenAttach struct{ token string }

var _ protocol.Filter = (*TokenAttach)(nil)

// NewTokenAttach returns the filter that sends token.
func NewTokenAttach(token string) *TokenAttach { return &TokenAttach{token: token} }

// Invoke implements protocol.Filter.
func (f *TokenAttach) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	c := *inv
	c.Attachments = maps.Clone(inv.Attachments)
	if c.Attachments == nil {
		c.Attachments = make(map[string]string, 1)
	}
	c.Attachments[protocol.KeyToken] = f.token
	return next.Invoke(ctx, &c)
}

// Executes bounds, on the provider, the calls of one service running at
// once; calls over the bound are answered "server busy"
// (status.ErrServerBusy), which consumers retry elsewhere.
type Executes struct {
	n   int
	sem chan struct{}
}

var _ protocol.Filter = (*Executes)(nil)

// NewExecutes returns a bound of n calls. n of 0 or less is no bound
// (every call passes), as config's executes: 0; it panicked when negative.
func NewExecutes(n int) *Executes {
	if n <= 0 {
		return &Executes{}
	}
	return &Executes{n: n, sem: make(chan struct{}, n)}
}

// Invoke implements protocol.Filter.
func (f *Executes) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	if f.sem == nil {
		return next.Invoke(ctx, inv)
	}
	select {
	case f.sem <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %s.%s: the executes limit (%d at once) is reached", status.ErrServerBusy, inv.Service, inv.Method, f.n)
	}
	defer func() { <-f.sem }()
	return next.Invoke(ctx, inv)
}
