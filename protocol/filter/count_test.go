package filter_test

import (
	"context"
	"errors"
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
	ctx := t.Context()
	var r tally
	ok := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return &protocol.Result{}, nil }}
	failing := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return nil, status.ErrTimeout }}
	panicking := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { panic("boom") }}
	f := filter.NewCount(&r)
	inv := &protocol.Invocation{Service: "S", Method: "m"}

	_, err := protocol.Chain(ok, f).Invoke(ctx, inv)
	require.NoError(t, err)
	_, err = protocol.Chain(failing, f).Invoke(ctx, inv)
	require.ErrorIs(t, err, status.ErrTimeout)
	assert.PanicsWithValue(t, "boom", func() { _, _ = protocol.Chain(panicking, f).Invoke(ctx, inv) })

	assert.Equal(t, 3, r.begun)
	assert.Equal(t, 3, r.ended)
	assert.Equal(t, []filter.Mark{{Ref: &r, Start: clock - 2}, {Ref: &r, Start: clock - 1}, {Ref: &r, Start: clock}}, r.marks)
	require.Len(t, r.errs, 3)
	assert.NoError(t, r.errs[0])
	assert.ErrorIs(t, r.errs[1], status.ErrTimeout)
	assert.True(t, errors.Is(r.errs[2], filter.ErrPanicked))

	protocol.ResponseObserverOf(protocol.Chain(ok, f)).ResponseSent(inv, 42)
	assert.Equal(t, 42, r.sent)
	assert.Same(t, filter.Recorder(&r), f.Recorder())
}
