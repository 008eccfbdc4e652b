package filter

import (
	"context"
	"errors"

	"github.com/minidubbo/minidubbo/protocol"
)

// Recorder is told of every call a Count filter passes: the monitor's
// recorders (monitor.Monitor's CallFilter, AttemptFilter and
// ProviderRecorder) implement it to count calls, and so may a user's.
// Begin is called as a call starts; End exactly once as it ends, with the
// Mark Begin returned and the call's outcome. Both are called from the
// callers' goroutines, concurrently: they must be safe for that and must
// not block.
type Recorder interface {
	Begin(inv *protocol.Invocation) Mark
	End(inv *protocol.Invocation, m Mark, res *protocol.Result, err error)
}

// Mark is what a Recorder keeps of one call from Begin to End. Ref is
// the recorder's own (a pointer, so that a Mark allocates nothing), Start
// the call's start in the recorder's clock.
type Mark struct {
	Ref   any
	Start int64
}

// ErrPanicked is the error End gets for a call whose next invoker
// panicked; the panic goes on after End.
var ErrPanicked = errors.New("filter: the call panicked")

// Count is the counting filter: it tells its Recorder when each call
// through it starts and ends. config puts one with the monitor's recorder
// in every chain: above the cluster (once per call), below it (once per
// attempt on a provider) and in front of every provided service. A call
// through it allocates nothing of its own.
type Count struct{ r Recorder }

var (
	_ protocol.Filter           = (*Count)(nil)
	_ protocol.Linker           = (*Count)(nil)
	_ protocol.ResponseObserver = (*Count)(nil)
)

// NewCount returns a counting filter that tells r.
func NewCount(r Recorder) *Count { return &Count{r: r} }

// Recorder returns the filter's recorder.
func (f *Count) Recorder() Recorder { return f.r }

// Invoke implements protocol.Filter.
func (f *Count) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	m := f.r.Begin(inv)
	ended := false
	defer func() {
		if !ended {
			f.r.End(inv, m, nil, ErrPanicked)
		}
	}()
	res, err := next.Invoke(ctx, inv)
	ended = true
	f.r.End(inv, m, res, err)
	return res, err
}

// ResponseSent passes the size of a response body the protocol encoded
// for inv on to the Recorder, when it is a protocol.ResponseObserver
// (the provider side's is, to count bytes out).
func (f *Count) ResponseSent(inv *protocol.Invocation, bytes int) {
	if o, ok := f.r.(protocol.ResponseObserver); ok {
		o.ResponseSent(inv, bytes)
	}
}

// Link implements protocol.Linker: the filter's link of a chain, which
// counts the calls to next as Invoke does, without a frame of the chain
// between the two (every call waiting below a Count has it on its stack).
func (f *Count) Link(next protocol.Invoker) protocol.Invoker {
	return &countLink{f: f, r: f.r, next: next}
}

// countLink is a Count's link of a chain.
type countLink struct {
	f    *Count
	r    Recorder
	next protocol.Invoker
}

var (
	_ protocol.Invoker          = (*countLink)(nil)
	_ protocol.Available        = (*countLink)(nil)
	_ protocol.ResponseObserver = (*countLink)(nil)
)

// Invoke counts the call to next, as Count.Invoke does.
func (l *countLink) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	m := l.r.Begin(inv)
	ended := false
	defer func() {
		if !ended {
			l.r.End(inv, m, nil, ErrPanicked)
		}
	}()
	res, err := l.next.Invoke(ctx, inv)
	ended = true
	l.r.End(inv, m, res, err)
	return res, err
}

func (l *countLink) URL() *protocol.URL { return l.next.URL() }

// Available reports whether next is available.
func (l *countLink) Available() bool { return protocol.IsAvailable(l.next) }

// Unwrap returns next, as a chain's links do.
func (l *countLink) Unwrap() protocol.Invoker { return l.next }

// Close closes next if it is an io.Closer.
func (l *countLink) Close() error {
	if c, ok := l.next.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// ResponseSent tells the filter's recorder, then next, as a chain's
// links do.
func (l *countLink) ResponseSent(inv *protocol.Invocation, bytes int) {
	l.f.ResponseSent(inv, bytes)
	if o, ok := l.next.(protocol.ResponseObserver); ok {
		o.ResponseSent(inv, bytes)
	}
}
