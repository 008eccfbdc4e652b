package dubbo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/status"
)

// thermostat takes a small integer.
type thermostat struct{}

func (thermostat) Set(_ context.Context, celsius int8) (int8, error) { return celsius, nil }

// TestNarrowIntegerArgument: an int8 argument given 300 was set to 44
// (msgpack/v5 truncates without an error) and the method ran with it; now
// the call is a bad request naming the argument, the number and the range,
// and the method does not run. 127 still goes through.
func TestNarrowIntegerArgument(t *testing.T) {
	ctx := testCtx(t)
	p := newProtocol(t, nil)
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Thermostat", nil), thermostat{})
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	inv := refer(t, p, exp.(*dubbo.Exporter).URL())

	var got int8
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Set", Args: []any{300}, Reply: &got})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, "argument 0 (int8): serialize: got an integer (300), expected an integer from -128 to 127")
	require.Zero(t, got)

	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Set", Args: []any{127}, Reply: &got})
	require.NoError(t, err)
	require.Equal(t, int8(127), got)
}
