package proxy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
)

// TestMonitorBothSides counts calls on both sides of a loopback call: the
// provider invoker behind a monitor filter (the protocol still finds its
// argument types through the chain) and the consumer stub in front of one.
func TestMonitorBothSides(t *testing.T) {
	ctx := testCtx(t)
	p, err := dubbo.New(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	m := monitor.New()

	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "demo.Greeter", nil)
	provider, err := proxy.NewProvider(u, &greeterImpl{})
	require.NoError(t, err)
	exp, err := p.Export(protocol.Chain(provider, m.Filter(monitor.Provider)))
	require.NoError(t, err)
	remote, err := p.Refer(exp.(*dubbo.Exporter).URL().With(protocol.KeyRemoteApplication, "tester"))
	require.NoError(t, err)

	var c struct {
		Find func(context.Context, int) (*user, error)
		Ping func(context.Context) error
	}
	require.NoError(t, proxy.Refer(&c, protocol.Chain(remote, m.Filter(monitor.Consumer))))
	for id := range 3 {
		u, err := c.Find(ctx, id)
		if id == 0 {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, id, u.Age, "struct arguments and replies cross a chained provider")
	}
	require.NoError(t, c.Ping(ctx))

	type row struct {
		side                          monitor.Side
		method                        string
		calls, ok, failed, concurrent int64
	}
	var got []row
	for _, s := range m.Snapshot() {
		assert.Equal(t, "demo.Greeter", s.Service)
		assert.LessOrEqual(t, s.MaxElapsed, s.Elapsed)
		// The protocol tells both sides the body sizes, and the provider
		// who called.
		assert.Positive(t, s.BytesIn, "%s %s bytes in", s.Side, s.Method)
		assert.Positive(t, s.BytesOut, "%s %s bytes out", s.Side, s.Method)
		if s.Side == monitor.Provider {
			assert.Equal(t, "tester@127.0.0.1", s.Consumer)
		}
		got = append(got, row{s.Side, s.Method, s.Calls, s.Successes, s.Failures, s.Concurrent})
	}
	assert.Equal(t, []row{
		{monitor.Consumer, "Find", 3, 2, 1, 0},
		{monitor.Provider, "Find", 3, 2, 1, 0},
		{monitor.Consumer, "Ping", 1, 1, 0, 0},
		{monitor.Provider, "Ping", 1, 1, 0, 0},
	}, got)
}
