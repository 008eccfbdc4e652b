package dubbo_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

func TestCallRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	_, u := export(t, srv, providerURL("demo.Greeter"))
	require.NotZero(t, u.Port)
	cli := newProtocol(t, nil)
	inv := refer(t, cli, u)

	res, err := inv.Invoke(ctx, &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{"world"}})
	require.NoError(t, err)
	require.Equal(t, "hello world", res.Value)

	var sum int
	res, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Add", Args: []any{2, 40}, Reply: &sum})
	require.NoError(t, err)
	require.Equal(t, 42, sum)
	require.Same(t, &sum, res.Value)

	var p Person
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Greet", Args: []any{Person{Name: "ann", Age: 3}}, Reply: &p})
	require.NoError(t, err)
	require.Equal(t, Person{Name: "dear ann", Age: 4}, p)

	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Fail", Args: []any{"cat"}})
	var se *service.Error
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, service.CodeNotFound, se.Code)
	require.True(t, se.Remote)
	require.Equal(t, "no cat", se.Message)
}
