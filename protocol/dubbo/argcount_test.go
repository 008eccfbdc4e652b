package dubbo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/status"
)

// calc has methods of zero, one and two arguments.
type calc struct{}

func (calc) Zero(context.Context) (int, error)            { return 0, nil }
func (calc) Neg(_ context.Context, a int) (int, error)    { return -a, nil }
func (calc) Add(_ context.Context, a, b int) (int, error) { return a + b, nil }

// A call with another number of arguments than the method takes is a bad
// request that says how many it takes, in words that read right for 0, 1
// and more (it said "takes 1 arguments").
func TestWrongArgumentCountSaysHowMany(t *testing.T) {
	ctx := testCtx(t)
	p := newProtocol(t, nil)
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Calc", nil), calc{})
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	inv := refer(t, p, exp.(*dubbo.Exporter).URL())

	for _, tc := range []struct {
		method string
		args   []any
		want   string
	}{
		{"Zero", []any{1}, "dubbo: demo.Calc.Zero() takes no argument, got 1"},
		{"Neg", nil, "dubbo: demo.Calc.Neg(int) takes 1 argument, got 0"},
		{"Add", []any{1}, "dubbo: demo.Calc.Add(int, int) takes 2 arguments, got 1"},
	} {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: tc.method, Args: tc.args})
		require.Error(t, err, tc.method)
		assert.ErrorIs(t, err, status.ErrBadRequest, tc.method)
		assert.Contains(t, err.Error(), tc.want)
	}
	var sum int
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Add", Args: []any{2, 3}, Reply: &sum})
	require.NoError(t, err)
	assert.Equal(t, 5, sum)
}
