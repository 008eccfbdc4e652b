package filter_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/status"
)

// tally is a Recorder that keeps what it was told.
type tally struct {
	begun, ended int
	errs         []error
	marks        []filter.Mark
	sent         int
}

var clock int64

func (t *tally) Begin(*protocol.Invocation) filter.Mark {
	t.begun++
	clock++
	return filter.Mark{Ref: t, Start: clock}
}

func (t *tally) End(_ *protocol.Invocation, m filter.Mark, _ *protocol.Result, err error) {
	t.ended++
	t.marks = append(t.marks, m)
	t.errs = append(t.errs, err)
}

func (t *tally) ResponseSent(_ *protocol.Invocation, bytes int) { t.sent += bytes }

// Count tells its Recorder of every call: one Begin and one End each,
// with Begin's Mark and the outcome; a panic ends the call as
// ErrPanicked and goes on; response sizes reach a Recorder that observes
// them.
func TestCount(t *testing.T) {
	// Chain makes a Count its own link (protocol.Linker); unlinked, it goes
	// through Chain's own link: both count alike.
	for name, chain := range map[string]func(protocol.Invoker, *filter.Count) protocol.Invoker{
		"link":   func(inv protocol.Invoker, f *filter.Count) protocol.Invoker { return protocol.Chain(inv, f) },
		"filter": func(inv protocol.Invoker, f *filter.Count) protocol.Invoker { return protocol.Chain(inv, unlinked{f}) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			var r tally
			ok := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return &protocol.Result{}, nil }}
			failing := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return nil, status.ErrTimeout }}
			panicking := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { panic("boom") }}
			f := filter.NewCount(&r)
			inv := &protocol.Invocation{Service: "S", Method: "m"}

			_, err := chain(ok, f).Invoke(ctx, inv)
			require.NoError(t, err)
			_, err = chain(failing, f).Invoke(ctx, inv)
			require.ErrorIs(t, err, status.ErrTimeout)
			assert.PanicsWithValue(t, "boom", func() { _, _ = chain(panicking, f).Invoke(ctx, inv) })

			assert.Equal(t, 3, r.begun)
			assert.Equal(t, 3, r.ended)
			assert.Equal(t, []filter.Mark{{Ref: &r, Start: clock - 2}, {Ref: &r, Start: clock - 1}, {Ref: &r, Start: clock}}, r.marks)
			require.Len(t, r.errs, 3)
			assert.NoError(t, r.errs[0])
			assert.ErrorIs(t, r.errs[1], status.ErrTimeout)
			assert.True(t, errors.Is(r.errs[2], filter.ErrPanicked))

			protocol.ResponseObserverOf(chain(ok, f)).ResponseSent(inv, 42)
			assert.Equal(t, 42, r.sent)
			assert.Same(t, filter.Recorder(&r), f.Recorder())
		})
	}
}

// unlinked is a Count that Chain wraps in a link of its own.
type unlinked struct{ c *filter.Count }

func (u unlinked) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	return u.c.Invoke(ctx, inv, next)
}
func (u unlinked) ResponseSent(inv *protocol.Invocation, n int) { u.c.ResponseSent(inv, n) }

// end is the invoker at the end of a chain: it observes responses, can
// be down, and counts its closes; log is shared with the recorders.
type end struct {
	u      *protocol.URL
	down   bool
	closed int
	log    *[]string
}

func (e *end) URL() *protocol.URL { return e.u }
func (e *end) Invoke(context.Context, *protocol.Invocation) (*protocol.Result, error) {
	*e.log = append(*e.log, "end")
	return &protocol.Result{}, nil
}
func (e *end) Available() bool { return !e.down }
func (e *end) Close() error    { e.closed++; return nil }
func (e *end) ResponseSent(_ *protocol.Invocation, n int) {
	*e.log = append(*e.log, "end sent "+strconv.Itoa(n))
}

// named is a Recorder that logs under its name.
type named struct {
	name string
	log  *[]string
}

func (n named) Begin(*protocol.Invocation) filter.Mark {
	*n.log = append(*n.log, n.name+" begin")
	return filter.Mark{}
}
func (n named) End(*protocol.Invocation, filter.Mark, *protocol.Result, error) {
	*n.log = append(*n.log, n.name+" end")
}
func (n named) ResponseSent(_ *protocol.Invocation, b int) {
	*n.log = append(*n.log, n.name+" sent "+strconv.Itoa(b))
}

// A Count's own link answers as Chain's link around it does: order of
// the calls, the responses observed (outermost first, then the end),
// URL, availability, Unwrap down to the end and Close.
func TestCountLinkIsALink(t *testing.T) {
	run := func(link bool) (log []string, e *end, top protocol.Invoker) {
		e = &end{u: protocol.NewURL("dubbo", "127.0.0.1", 1, "S", nil), log: &log}
		var fs []protocol.Filter
		for _, n := range []string{"outer", "inner"} {
			var f protocol.Filter = filter.NewCount(named{name: n, log: &log})
			if !link {
				f = unlinked{f.(*filter.Count)}
			}
			fs = append(fs, f)
		}
		top = protocol.Chain(e, fs...)
		inv := &protocol.Invocation{Service: "S", Method: "m"}
		if _, err := top.Invoke(t.Context(), inv); err != nil {
			t.Fatal(err)
		}
		protocol.ResponseObserverOf(top).ResponseSent(inv, 7)
		return log, e, top
	}
	linked, e, top := run(true)
	assert.Equal(t, []string{"outer begin", "inner begin", "end", "inner end", "outer end", "outer sent 7", "inner sent 7", "end sent 7"}, linked)
	unlinkedLog, _, _ := run(false)
	assert.Equal(t, linked, unlinkedLog)

	assert.Same(t, e.u, top.URL())
	assert.True(t, protocol.IsAvailable(top))
	e.down = true
	assert.False(t, protocol.IsAvailable(top))
	var inner protocol.Invoker = top
	for range 2 {
		u, ok := inner.(interface{ Unwrap() protocol.Invoker })
		require.True(t, ok)
		inner = u.Unwrap()
	}
	assert.Same(t, protocol.Invoker(e), inner)
	require.NoError(t, top.(interface{ Close() error }).Close())
	assert.Equal(t, 1, e.closed)
}
