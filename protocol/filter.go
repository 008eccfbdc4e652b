package protocol

import "context"

// Filter intercepts calls: it may look at or change the invocation, call
// next (or not), and look at or change the outcome. Filters must be safe
// for concurrent use.
type Filter interface {
	Invoke(ctx context.Context, inv *Invocation, next Invoker) (*Result, error)
}

// FilterFunc adapts a function to a Filter.
type FilterFunc func(ctx context.Context, inv *Invocation, next Invoker) (*Result, error)

// Invoke implements Filter.
func (f FilterFunc) Invoke(ctx context.Context, inv *Invocation, next Invoker) (*Result, error) {
	return f(ctx, inv, next)
}

// Chain returns an invoker that passes every call through filters, the
// first filter outermost, and then to inv. The chain is built once; a call
// through it allocates nothing for the chain itself. A filter that is a
// Linker makes its own link.
func Chain(inv Invoker, filters ...Filter) Invoker {
	for i := len(filters) - 1; i >= 0; i-- {
		if l, ok := filters[i].(Linker); ok {
			inv = l.Link(inv)
			continue
		}
		inv = &filtered{f: filters[i], next: inv}
	}
	return inv
}

// A Linker is a Filter that makes its own link of a chain: Chain calls
// Link(next) and puts the invoker it returns where its own link around
// the filter would be. A call through the chain then runs one function
// less for the filter (Chain's link calls the filter's Invoke), and a call
// waiting below it keeps one frame less on its stack for every
// collection to walk. The invoker Link returns must do on each call what
// the filter's Invoke does with next, and must answer as Chain's links
// do: URL is next's, Available is IsAvailable(next), Unwrap returns next,
// Close closes next when it is an io.Closer, and it is a ResponseObserver
// that tells the filter (when it observes responses) and then next (when
// it does).
type Linker interface {
	Filter
	Link(next Invoker) Invoker
}

type filtered struct {
	f    Filter
	next Invoker
}

func (c *filtered) URL() *URL { return c.next.URL() }

func (c *filtered) Invoke(ctx context.Context, inv *Invocation) (*Result, error) {
	return c.f.Invoke(ctx, inv, c.next)
}

// ResponseSent passes the size of a response body on to the chain's
// filters that observe it (see ResponseObserver), outermost first.
func (c *filtered) ResponseSent(inv *Invocation, bytes int) {
	if o, ok := c.f.(ResponseObserver); ok {
		o.ResponseSent(inv, bytes)
	}
	if o, ok := c.next.(ResponseObserver); ok {
		o.ResponseSent(inv, bytes)
	}
}

// Unwrap returns the next invoker of the chain, so that a protocol can find
// optional interfaces (such as ArgTyper) of the invoker at its end.
func (c *filtered) Unwrap() Invoker { return c.next }

// Available reports whether the invoker at the end of the chain is available.
func (c *filtered) Available() bool { return IsAvailable(c.next) }

// Close closes the invoker at the end of the chain if it is an io.Closer.
func (c *filtered) Close() error {
	if cl, ok := c.next.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

// ResponseObserver is implemented by provider-side filters that count the
// bytes of responses, which are encoded only after the filters returned:
// the protocol calls ResponseSent with the size of each response body it
// encoded for inv. A chain built by Chain passes the call on to those of
// its filters that implement it. It must not block.
type ResponseObserver interface {
	ResponseSent(inv *Invocation, bytes int)
}

// ResponseObserverOf returns the ResponseObserver at the head of inv, or
// of the first invoker that implements it behind wrappers with an Unwrap
// method; nil when there is none. Protocols look it up once, at export.
func ResponseObserverOf(inv Invoker) ResponseObserver {
	for range 64 {
		if o, ok := inv.(ResponseObserver); ok {
			return o
		}
		u, ok := inv.(interface{ Unwrap() Invoker })
		if !ok {
			return nil
		}
		inv = u.Unwrap()
	}
	return nil
}
