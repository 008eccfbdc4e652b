package dubbo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/protocol"
)

// TestLeaveAndDeathToldApart: the consumer's log tells a provider that
// shut down gracefully (it announced it) from one whose connection died.
func TestLeaveAndDeathToldApart(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zap.InfoLevel)
	cli := newProtocol(t, &dubboOptions{Logger: zap.New(core), Reconnect: time.Hour})

	graceful := newProtocol(t, nil)
	_, gu := export(t, graceful, providerURL("demo.Greeter"))
	dead := newProtocol(t, nil)
	_, du := export(t, dead, providerURL("demo.Greeter"))
	for _, u := range []*protocol.URL{gu, du} {
		_, err := refer(t, cli, u).Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
		require.NoError(t, err)
	}

	require.NoError(t, graceful.Shutdown(ctx))
	require.Eventually(t, func() bool {
		return logs.FilterMessage("provider left gracefully (it announced its shutdown)").FilterField(zap.String("addr", gu.Address())).Len() == 1
	}, testTimeout, 5*time.Millisecond)

	require.NoError(t, dead.Close())
	require.Eventually(t, func() bool {
		return logs.FilterMessage("connection to provider lost; reconnecting").FilterField(zap.String("addr", du.Address())).Len() == 1
	}, testTimeout, 5*time.Millisecond)
	lost := logs.FilterMessage("connection to provider lost; reconnecting").All()[0]
	require.Equal(t, zap.WarnLevel, lost.Level)
	require.Contains(t, lost.ContextMap()["error"], "connection lost")
	require.Zero(t, logs.FilterMessage("provider left gracefully (it announced its shutdown)").FilterField(zap.String("addr", du.Address())).Len())
}
