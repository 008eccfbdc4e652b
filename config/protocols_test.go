package config_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
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

// counted is a protocol of its own for the door's tests: the dubbo
// protocol's connections under the name toy, counting what the
// application asks of it.
type counted struct {
	*dubbo.Protocol
	exports, refers, shutdowns, closes atomic.Int64
}

func (c *counted) Export(inv protocol.Invoker) (protocol.Exporter, error) {
	c.exports.Add(1)
	return c.Protocol.Export(inv)
}

func (c *counted) Refer(u *protocol.URL) (protocol.Invoker, error) {
	c.refers.Add(1)
	return c.Protocol.Refer(u)
}

func (c *counted) Shutdown(ctx context.Context) error {
	c.shutdowns.Add(1)
	return c.Protocol.Shutdown(ctx)
}

func (c *counted) Close() error {
	c.closes.Add(1)
	return c.Protocol.Close()
}

// The protocol door: a protocol added with WithProtocol is made once per
// application with the application's serializers, serves and refers by
// its name (over real TCP here), is drained and closed at Shutdown; a
// provider URL of a scheme no protocol has is skipped with a warning that
// lists the known ones; TLS on a protocol that cannot speak it is an
// error; a taken name, a nil factory and a failing factory are errors.
func TestProtocolDoor(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	var made atomic.Int64
	toy := &counted{}
	factory := func(s protocol.Settings) (protocol.Protocol, error) {
		made.Add(1)
		if !slices.Contains(s.Serializers.Names(), "msgpack") || s.Logger == nil {
			return nil, errors.New("settings without serializers or logger")
		}
		p, err := dubbo.New(&dubbo.Options{Serializers: s.Serializers, Logger: s.Logger})
		toy.Protocol = p
		return toy, err
	}
	core, logs := observer.New(zap.WarnLevel)
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://door"}},
		Protocols:  map[string]config.ProtocolConfig{"t": {Name: "toy"}},
		Services:   map[string]config.ServiceConfig{"named": {Interface: "demo.Named"}},
		References: map[string]config.ReferenceConfig{"named": {Interface: "demo.Named", Check: true}},
	}, config.WithRegistry("mem", reg), config.WithProtocol("toy", factory), config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	assert.Equal(t, int64(1), made.Load(), "made at New, for protocols.t")

	u, err := app.Export(ctx, "named", named{"toy"})
	require.NoError(t, err)
	assert.Equal(t, "toy", u.Protocol)
	// A provider of a protocol nobody added, next to it.
	require.NoError(t, reg.Register(ctx, protocol.NewURL("rest", "127.0.0.1", 1, "demo.Named",
		map[string]string{protocol.KeyInterface: "demo.Named"})))
	var c namedClient
	require.NoError(t, app.Refer(ctx, "named", &c))
	for i := range 5 {
		got, err := c.Who(ctx, int64(i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("toy:%d", i), got)
	}
	assert.Equal(t, []int64{1, 1, 1}, []int64{made.Load(), toy.exports.Load(), toy.refers.Load()})
	skipped := logs.FilterMessageSnippet("refer provider failed").All()
	require.Len(t, skipped, 1)
	assert.Contains(t, fmt.Sprint(skipped[0].ContextMap()["error"]), `protocol: unknown "rest" (known: dubbo, toy)`)

	require.NoError(t, app.Shutdown(ctx))
	assert.Equal(t, []int64{1, 1}, []int64{toy.shutdowns.Load(), toy.closes.Load()}, "drained, then closed")

	// TLS on a protocol without ExportTLS.
	plain := &config.Config{
		Protocols: map[string]config.ProtocolConfig{"t": {Name: "line"}},
		Services:  map[string]config.ServiceConfig{"named": {Interface: "demo.Named"}},
	}
	lineProto := func(protocol.Settings) (protocol.Protocol, error) { return lineOnly{}, nil }
	tapp, err := config.New(plain, config.WithProtocol("line", lineProto),
		config.WithServerTLS("t", &tls.Config{MinVersion: tls.VersionTLS12}), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer tapp.Shutdown(context.Background())
	_, err = tapp.Export(ctx, "named", named{"x"})
	require.ErrorContains(t, err, "protocol line does not speak TLS")

	for _, tc := range []struct {
		opt  config.Option
		want string
	}{
		{config.WithProtocol("dubbo", factory), `protocol: register "dubbo": name already taken`},
		{config.WithProtocol("nil", nil), `protocol: register "nil": nil factory`},
		{config.WithProtocol("toy", func(protocol.Settings) (protocol.Protocol, error) { return nil, errors.New("no toys") }),
			"config: protocol toy: no toys"},
	} {
		_, err := config.New(&config.Config{Protocols: map[string]config.ProtocolConfig{"t": {Name: "toy"}}}, tc.opt)
		require.ErrorContains(t, err, tc.want)
	}
}

// lineOnly is a protocol that exports nothing and has no TLS.
type lineOnly struct{}

func (lineOnly) Export(protocol.Invoker) (protocol.Exporter, error) { return nil, errors.New("no") }
func (lineOnly) Refer(*protocol.URL) (protocol.Invoker, error)      { return nil, errors.New("no") }
func (lineOnly) Close() error                                       { return nil }
