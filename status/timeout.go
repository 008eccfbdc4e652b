package status

import (
	"context"
	"strings"
	"time"
)

// Source names the setting that decided how long a call may take.
type Source uint8

// Sources of a call's timeout. A call may take, first match wins:
//
//  1. the caller's context deadline, when sooner than the rest (SourceContext);
//  2. the reference's timeout for the method (SourceMethod);
//  3. the reference's timeout, when set (SourceReference);
//  4. the timeout the provider's URL advertises, for the method, then for
//     the service (SourceProvider), capped by the consumer;
//  5. the framework's default, 1s (SourceDefault).
//
// The README's "Errors and timeouts" has the same table with the YAML keys.
const (
	// SourceUnknown: the layer that saw the timeout did not know.
	SourceUnknown Source = iota
	// SourceContext: the caller's context deadline came first.
	SourceContext
	// SourceMethod: the reference's per-method timeout (methods.<m>.timeout).
	SourceMethod
	// SourceReference: the reference's timeout.
	SourceReference
	// SourceProvider: the timeout the provider advertised in its URL.
	SourceProvider
	// SourceDefault: no setting; the framework's default.
	SourceDefault
)

var sourceNames = [...]string{
	SourceUnknown:   "unknown setting",
	SourceContext:   "context deadline",
	SourceMethod:    "method timeout",
	SourceReference: "reference timeout",
	SourceProvider:  "provider's advertised timeout",
	SourceDefault:   "default timeout",
}

// String returns the setting's name, such as "reference timeout".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown setting"
}

// Side says which end of a call gave up.
type Side uint8

// Sides.
const (
	// Consumer: the caller stopped waiting.
	Consumer Side = iota + 1
	// Provider: the method's context ran out on the provider, which
	// answered with a timeout status.
	Provider
)

// String returns "consumer" or "provider".
func (s Side) String() string {
	switch s {
	case Consumer:
		return "consumer"
	case Provider:
		return "provider"
	}
	return "unknown side"
}

// TimeoutError is every timeout of a call, whichever side fired and
// whichever setting set it. It matches errors.Is(err, ErrTimeout) and
// errors.Is(err, context.DeadlineExceeded), and reads like
//
//	shop.Inventory.Get timed out after 1s on the consumer (reference timeout)
type TimeoutError struct {
	// Service and Method name the call, when known.
	Service, Method string
	// Addr is the provider's address, when known.
	Addr string
	// Timeout is how long the call was allowed.
	Timeout time.Duration
	// Source is the setting that decided Timeout.
	Source Source
	// Side is the end that gave up.
	Side Side
}

// Error describes the timeout: what, how long, where, and why that long.
func (e *TimeoutError) Error() string {
	var b strings.Builder
	switch {
	case e.Service != "" && e.Method != "":
		b.WriteString(e.Service + "." + e.Method)
	case e.Method != "":
		b.WriteString(e.Method)
	default:
		b.WriteString("call")
	}
	b.WriteString(" timed out after ")
	b.WriteString(e.Timeout.String())
	b.WriteString(" on the ")
	b.WriteString(e.Side.String())
	if e.Addr != "" {
		if e.Side == Provider {
			b.WriteString(" " + e.Addr)
		} else {
			b.WriteString(" calling " + e.Addr)
		}
	}
	b.WriteString(" (" + e.Source.String() + ")")
	return b.String()
}

// Is matches ErrTimeout and context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}
