package protocol_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/minidubbo/minidubbo/protocol"
)

// calls is a filter that counts the calls through it. As a
// protocol.Linker it makes its own link of a chain, so a call through the
// chain runs callsLink.Invoke alone for it, not Chain's link and then
// calls.Invoke.
type calls struct{ n atomic.Int64 }

func (c *calls) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	c.n.Add(1)
	return next.Invoke(ctx, inv)
}

func (c *calls) Link(next protocol.Invoker) protocol.Invoker { return &callsLink{c: c, next: next} }

// callsLink does what calls.Invoke does with next, and answers the rest
// as Chain's links do.
type callsLink struct {
	c    *calls
	next protocol.Invoker
}

func (l *callsLink) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	l.c.n.Add(1)
	return l.next.Invoke(ctx, inv)
}
func (l *callsLink) URL() *protocol.URL       { return l.next.URL() }
func (l *callsLink) Available() bool          { return protocol.IsAvailable(l.next) }
func (l *callsLink) Unwrap() protocol.Invoker { return l.next }
func (l *callsLink) Close() error {
	if c, ok := l.next.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
func (l *callsLink) ResponseSent(inv *protocol.Invocation, bytes int) {
	if o, ok := l.next.(protocol.ResponseObserver); ok {
		o.ResponseSent(inv, bytes)
	}
}

func ExampleLinker() {
	echo := protocol.InvokerFunc{F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{Value: inv.Args[0]}, nil
	}}
	f := new(calls)
	inv := protocol.Chain(echo, f)
	_, linked := inv.(*callsLink)
	for _, s := range []string{"a", "b"} {
		res, err := inv.Invoke(context.Background(), &protocol.Invocation{Method: "Echo", Args: []any{s}})
		fmt.Println(res.Value, err)
	}
	fmt.Println("calls:", f.n.Load(), "linked:", linked)
	// Output:
	// a <nil>
	// b <nil>
	// calls: 2 linked: true
}
