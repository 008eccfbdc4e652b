package protocol

import (
	"context"
	"net"
	"reflect"
	"sync/atomic"
)

// Invocation is one call as it travels through the layers. The consumer
// stub builds it; filters may read it; nothing may modify it after it is
// passed to Invoke except the layer that built it.
type Invocation struct {
	// Service is the interface name; Version and Group select among
	// providers of the same interface.
	Service, Version, Group string
	Method                  string
	Args                    []any
	// Attachments travel with the request (token, tag, timeout, ...).
	// Nobody modifies the map of an invocation given to them (a filter
	// that changes the attachments sets a changed copy): on the provider
	// the protocol may share one map between calls.
	Attachments map[string]string
	// Reply, on the consumer, is a non-nil pointer into which the response
	// value is decoded; nil decodes it as a plain any into Result.Value.
	Reply any

	// On the provider side the protocol sets RemoteAddr, the consumer's
	// address, and RequestBytes, the size of the request body on the wire.
	RemoteAddr   net.Addr
	RequestBytes int

	// result is the room NewResult hands out once; resultTaken is set
	// (atomically) when it has.
	result      Result
	resultTaken uint32
}

// NewResult returns a zero Result for an answer to inv. The first call
// returns room kept in the Invocation itself, so that a protocol answering
// a call saves an allocation; later calls (a retry, a forked call of the
// same invocation) each return a new Result. It is safe for concurrent
// use. Like a new Result, the one returned belongs to whoever asked.
func (inv *Invocation) NewResult() *Result {
	if atomic.CompareAndSwapUint32(&inv.resultTaken, 0, 1) {
		return &inv.result
	}
	return new(Result)
}

// Attachment returns the value of attachment key, or "".
func (inv *Invocation) Attachment(key string) string { return inv.Attachments[key] }

// Result is the answer to an Invocation that the provider produced. A
// business error is not a Result: Invoke returns it as a *service.Error.
type Result struct {
	// Value is the returned value: Invocation.Reply when that was set,
	// otherwise the decoded value.
	Value any
	// Attachments sent back by the provider.
	Attachments map[string]string
	// RequestBytes and ResponseBytes are the sizes of the request and
	// response bodies on the wire, set by the protocol on the consumer side
	// (0 when it does not know them).
	RequestBytes, ResponseBytes int
}

// Invoker makes calls; it is the RoundTripper of this framework. Invoke
// returns a non-nil error for business errors (a *service.Error), for
// answers with a non-OK status and for failures to get an answer; the
// cluster layer tells these apart with the helpers of this package.
//
// Implementations must be safe for concurrent use. An Invoker that holds a
// connection also implements io.Closer; whoever created it closes it.
type Invoker interface {
	URL() *URL
	Invoke(ctx context.Context, inv *Invocation) (*Result, error)
}

// Available is implemented by invokers that can tell whether they can take
// a call now (for example whether their connection is up). Invokers that do
// not implement it are taken as available.
type Available interface {
	Available() bool
}

// IsAvailable reports whether inv can take a call, by Available if it has it.
func IsAvailable(inv Invoker) bool {
	if a, ok := inv.(Available); ok {
		return a.Available()
	}
	return true
}

// ArgTyper is implemented by provider invokers that know the parameter types
// of their methods, so the protocol decodes arguments straight into them.
// ArgTypes returns false for an unknown method.
type ArgTyper interface {
	ArgTypes(method string) ([]reflect.Type, bool)
}

// Exporter is a service being served by a protocol. URL is the URL it is
// served at, with the real port (the one to register); Unexport stops
// serving it and is idempotent.
type Exporter interface {
	URL() *URL
	Invoker() Invoker
	Unexport() error
}

// InvokerFunc adapts a function to an Invoker with the given URL.
type InvokerFunc struct {
	U *URL
	F func(ctx context.Context, inv *Invocation) (*Result, error)
}

// URL implements Invoker.
func (f InvokerFunc) URL() *URL { return f.U }

// Invoke implements Invoker.
func (f InvokerFunc) Invoke(ctx context.Context, inv *Invocation) (*Result, error) {
	return f.F(ctx, inv)
}
