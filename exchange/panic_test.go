package exchange_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// TestHandlerPanicKeepsItsValue: a handler that panics answers a server
// error with an incident id; the panic value and the stack stay in the
// provider's log under that id.
func TestHandlerPanicKeepsItsValue(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zap.ErrorLevel)
	h := exchange.HandlerFunc(func(context.Context, *exchange.Request) (*transport.Buffer, error) {
		panic("db password is hunter2")
	})
	_, addr := serve(t, h, &exchange.Options{Logger: zap.New(core)})
	_, err := call(ctx, dial(t, addr, nil), "x")
	require.ErrorIs(t, err, status.ErrServerError)
	require.NotContains(t, err.Error(), "hunter2")
	require.Regexp(t, `incident [0-9a-f]{16}`, err.Error())
	require.Equal(t, 1, logs.Len())
	e := logs.All()[0].ContextMap()
	require.Contains(t, err.Error(), e["incident"].(string))
	require.Equal(t, "db password is hunter2", e["panic"])
	require.Contains(t, e["stack"], "panic(")
}
