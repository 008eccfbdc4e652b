package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
)

const twoPortsYAML = `
protocols:
  a: {port: 0}
  b: {port: 0}
services:
  onA:  {interface: demo.Named, protocol: a}
  onB:  {interface: demo.Named, protocol: b}
  alsoA: {interface: demo.Other, protocol: a}
`

// Two protocols with port 0 get a free port each: the same interface is
// exported on both, and each port answers with its own provider; a
// second service of a protocol shares that protocol's port.
func TestTwoProtocolsOnPortZero(t *testing.T) {
	ctx := testCtx(t)
	cfg, err := config.Parse(strings.NewReader(twoPortsYAML))
	require.NoError(t, err)
	app, err := config.New(cfg, config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	ua, err := app.Export(ctx, "onA", named{"a"})
	require.NoError(t, err)
	ub, err := app.Export(ctx, "onB", named{"b"})
	require.NoError(t, err, "the same interface on a second port-0 protocol")
	uo, err := app.Export(ctx, "alsoA", named{"other"})
	require.NoError(t, err)
	require.NotZero(t, ua.Port)
	require.NotZero(t, ub.Port)
	assert.NotEqual(t, ua.Port, ub.Port, "one free port per protocol")
	assert.Equal(t, ua.Port, uo.Port, "the services of one protocol share its port")

	consumer, err := config.New(&config.Config{References: map[string]config.ReferenceConfig{
		"toA": {Interface: "demo.Named", URL: ua.Address()},
		"toB": {Interface: "demo.Named", URL: ub.Address()},
	}}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer consumer.Shutdown(context.Background())
	for id, want := range map[string]string{"toA": "a:7", "toB": "b:7"} {
		var c namedClient
		require.NoError(t, consumer.Refer(ctx, id, &c))
		got, err := c.Who(ctx, 7)
		require.NoError(t, err)
		assert.Equal(t, want, got, id)
	}
}
