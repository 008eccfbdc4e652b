package config_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// A filter name in the YAML that nobody added says how to add one, and a
// near miss of one that was added is suggested.
func TestUnknownFilterSaysHowToAddOne(t *testing.T) {
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://newcomer"}},
		Services:   map[string]config.ServiceConfig{"s": {Interface: "demo.S", Filters: []string{"accesslog"}}},
	}
	_, err := config.New(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(),
		`config: services.s.filters: unknown filter "accesslog" (none is known: a name here must be added first with config.WithFilter("accesslog", f))`)

	pass := protocol.FilterFunc(func(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
		return next.Invoke(ctx, inv)
	})
	c.Services = nil
	c.References = map[string]config.ReferenceConfig{"r": {Interface: "demo.S", CallFilters: []string{"perCal"}}}
	_, err = config.New(c, config.WithFilter("perCall", pass), config.WithFilter("audit", pass))
	require.Error(t, err)
	assert.Contains(t, err.Error(),
		`config: references.r.call_filters: unknown filter "perCal"; did you mean "perCall"? (known: audit, perCall)`)
}

// A provider port another process holds fails Export with the cause and
// what to change.
func TestExportPortInUseSaysWhatToChange(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	reg := memory.New()
	defer reg.Close()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://newcomer"}},
		Protocols:  map[string]config.ProtocolConfig{"dubbo": {Host: "127.0.0.1", Port: port}},
		Services:   map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() { _ = app.Shutdown(context.Background()) }()

	_, err = app.Export(ctx, "orders", &orders{})
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Contains(t, err.Error(), ": bind: address already in use: port "+strconv.Itoa(port)+" of protocols.dubbo is taken by another process "+
		"(set protocols.dubbo.port to a free port, or 0 for any free port)")
	var ke *config.KeyError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, "protocols.dubbo.port", ke.Key)
	assert.NotContains(t, config.WithoutAdvice(err).Error(), "set protocols")
}

// Refer with Check against a ZooKeeper that is not there says the registry
// is unreachable (errors.Is ErrRegistryUnreachable), not only that no
// provider was found; against one that answers, no provider is only that.
func TestReferCheckRegistryDown(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"zk": {Address: "zookeeper://" + addr, Timeout: 300 * time.Millisecond, CacheFile: "-"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", Check: true}},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() { _ = app.Shutdown(context.Background()) }()
	var c ordersClient
	err = app.Refer(ctx, "orders", &c)
	require.Error(t, err)
	assert.ErrorIs(t, err, config.ErrRegistryUnreachable)
	assert.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.Contains(t, err.Error(), "config: refer orders: check: registry unreachable: cluster: no provider test.Orders")
	assert.Contains(t, err.Error(), "asked registry zk: zookeeper://"+addr+" (not connected")
	assert.True(t, strings.HasSuffix(err.Error(), "(is the registry running at that address? Providers are found only once it answers)"), err.Error())
	assert.Nil(t, c.Total, "the stub stays unfilled")

	// Without Check, Refer only warns; the call's "no provider" says the same.
	app1, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"zk": {Address: "zookeeper://" + addr, Timeout: 300 * time.Millisecond, CacheFile: "-"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders"}},
	}, config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() { _ = app1.Shutdown(context.Background()) }()
	require.NoError(t, app1.Refer(ctx, "orders", &c))
	_, err = c.Tag(ctx)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.True(t, strings.HasSuffix(err.Error(), "(is the registry running at that address? Providers are found only once it answers)"), err.Error())

	// A registry that answers but lists nobody: no provider, reachable.
	reg := memory.New()
	defer reg.Close()
	app2, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://newcomer", Timeout: 300 * time.Millisecond}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", Check: true}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() { _ = app2.Shutdown(context.Background()) }()
	err = app2.Refer(ctx, "orders", &c)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.NotErrorIs(t, err, config.ErrRegistryUnreachable)
	assert.True(t, strings.HasSuffix(err.Error(), "(is a provider of test.Orders running? Its interface name must be this one exactly)"), err.Error())
}

// A router name in the YAML that nobody added says how to add one (the
// list of known names was empty), or suggests a near miss of one added.
func TestUnknownRouterSaysHowToAddOne(t *testing.T) {
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://newcomer"}},
		References: map[string]config.ReferenceConfig{"r": {Interface: "demo.S", Routers: []string{"tagg"}}},
	}
	_, err := config.New(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config: references.r.routers[0]: "tagg" is no condition rule (when => then) and no router `+
		`(none is known: a name here must be added first with config.WithRouter("tagg", f); a rule reads like "method = find* => host = 10.0.0.2")`)
	assert.NotContains(t, err.Error(), "(known: )")

	keep := func(*protocol.URL) (cluster.Router, error) { return nil, nil }
	_, err = config.New(c, config.WithRouter("tag2", keep), config.WithRouter("heavy", keep))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config: references.r.routers[0]: "tagg" is no condition rule (when => then) and no router; did you mean "tag2"? (known: heavy, tag2)`)
}

// A nil context is an error from Export and Refer (it panicked in the
// registry after the port was bound), and Shutdown takes it as
// context.Background().
func TestNilContextIsAnError(t *testing.T) {
	ctx := testCtx(t)
	var nilCtx context.Context // as a caller that forgot to set one
	reg := memory.New()
	defer reg.Close()
	app := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{Interface: "test.Orders", Check: true})

	_, err := app.Export(nilCtx, "orders", &orders{})
	require.EqualError(t, err, "config: export orders: nil context.Context: pass context.Background(), or a context with a deadline to bound the wait")
	var c ordersClient
	require.EqualError(t, app.Refer(nilCtx, "orders", &c), "config: refer orders: nil context.Context: pass context.Background(), or a context with a deadline to bound the wait")
	assert.Nil(t, c.Total)
	g, err := app.ReferGeneric(nilCtx, "orders")
	require.Error(t, err)
	assert.Nil(t, g)

	// Nothing was left half done: the same calls with a context work.
	_, err = app.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	require.NoError(t, app.Refer(ctx, "orders", &c))
	total, err := c.Total(ctx, Order{Items: []string{"a", "b", "c"}}, 2)
	require.NoError(t, err)
	assert.Equal(t, 6, total)
	require.NoError(t, app.Shutdown(nilCtx))
}

// The YAML a Dubbo user writes out of habit, and values of the wrong
// type, are errors that name the key, its line and what to write.
func TestYAMLNewcomerMistakes(t *testing.T) {
	_, err := config.Parse(strings.NewReader(`application: {name: shop}
registry:
  address: "zookeeper://127.0.0.1:2181"
protocol: {port: 20880}
services:
  greeter: {interface: demo.Greeter, weight: abc, executes: 1.5, protocol: dubbo}
references:
  greeter: {interface: demo.Greeter, check: yes please, retries: "2", empty_protection: 1}
`))
	require.Error(t, err)
	assert.Equal(t, `config: registry (line 2): unknown key; registries are named: write registries: {zk: {address: "zookeeper://127.0.0.1:2181"}}
config: protocol (line 4): unknown key; protocols are named: write protocols: {dubbo: {port: 20880}}
config: services.greeter.weight (line 6): "abc" is not a whole number
config: services.greeter.executes (line 6): "1.5" is not a whole number
config: references.greeter.check (line 8): "yes please" is not true or false
config: references.greeter.retries (line 8): "2" is not a whole number
config: references.greeter.empty_protection (line 8): "1" is not true or false`, err.Error())

	_, err = config.Parse(strings.NewReader("dubbo:\n  application: {name: shop}\n"))
	assert.EqualError(t, err, "config: dubbo (line 1): unknown key; write this file's keys at the top level, "+
		"without dubbo: (application, registries, protocols, services, references, ...)")

	// What the decoder takes stays taken: whole floats, YAML 1.1 booleans, empty values.
	c, err := config.Parse(strings.NewReader(`registries: {zk: {address: "zookeeper://127.0.0.1:2181", check: yes}}
services: {greeter: {interface: demo.Greeter, weight: 1e3, executes: ~}}
references: {greeter: {interface: demo.Greeter, check: on, retries: 2.0}}
`))
	require.NoError(t, err)
	assert.Equal(t, 1000, *c.Services["greeter"].Weight)
	assert.True(t, c.References["greeter"].Check)
	assert.Equal(t, 2, *c.References["greeter"].Retries)
	assert.True(t, *c.Registries["zk"].Check)
}

// A value of the wrong shape (one value where keys or named entries go,
// one where a list goes) and a singular key where a list key goes say
// what to write; the decoder said "cannot unmarshal !!str `shop` into
// config.ApplicationConfig". Empty values stay the zero value.
func TestYAMLWrongShapes(t *testing.T) {
	for in, want := range map[string]string{
		"application: shop\n": `config: application (line 1): "shop" is a single value where keys go: write application: {name: shop} (keys: name, unknown_fields)`,
		"registries: zookeeper://127.0.0.1:2181\n": `config: registries (line 1): "zookeeper://127.0.0.1:2181" is a single value where named entries go: ` +
			`write registries: {NAME: {address: "zookeeper://127.0.0.1:2181"}}`,
		"services:\n  greeter: demo.Greeter\n": `config: services.greeter (line 2): "demo.Greeter" is a single value where keys go: ` +
			`write greeter: {interface: demo.Greeter} (keys: executes, filters, group, interface, protocol, registries, tag, timeout, token, version, warmup, weight)`,
		"references:\n  g: {interface: demo.Greeter, registry: zk}\n":   `config: references.g.registry (line 2): unknown key; registries takes a list: write registries: [zk]`,
		"references:\n  g: {interface: demo.Greeter, registries: zk}\n": `config: references.g.registries (line 2): a list goes here: write registries: [zk]`,
		"references:\n  g: {interface: demo.Greeter, routers: \"method = find* => host = 10.0.0.2\"}\n": `config: references.g.routers (line 2): a list goes here: ` +
			`write routers: ["method = find* => host = 10.0.0.2"]`,
	} {
		_, err := config.Parse(strings.NewReader(in))
		assert.EqualError(t, err, want, in)
	}
	// What each message says to write parses.
	for _, in := range []string{
		"application: {name: shop}\n",
		"registries: {zk: {address: \"zookeeper://127.0.0.1:2181\"}}\n",
		"references:\n  g: {interface: demo.Greeter, registries: [zk], routers: [\"method = find* => host = 10.0.0.2\"]}\n" +
			"registries: {zk: {address: \"zookeeper://127.0.0.1:2181\"}}\n",
		"application:\nregistries:\nservices:\n", // empty values
	} {
		_, err := config.Parse(strings.NewReader(in))
		assert.NoError(t, err, in)
	}
}

// Every error of New's validation is a KeyError naming its key's path, so
// a program that fills Config from flags can name its flag instead
// (greeter.FlagHint) without matching config's wording.
func TestValidationErrorsAreKeyErrors(t *testing.T) {
	retries := -1
	_, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://keys"}},
		References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", LoadBalance: "rr", Retries: &retries}},
		Monitor:    config.MonitorConfig{Interval: 10 * time.Millisecond},
	})
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "%T", err)
	var keys []string
	for _, e := range joined.Unwrap() {
		var ke *config.KeyError
		require.ErrorAs(t, e, &ke, "%v", e)
		assert.True(t, strings.HasPrefix(e.Error(), "config: "+ke.Key), "%q does not begin with its key %q", e, ke.Key)
		assert.Empty(t, ke.Advice)
		keys = append(keys, ke.Key)
	}
	assert.Equal(t, []string{"monitor.interval", "references.greeter.loadbalance", "references.greeter.retries"}, keys)
}

// An application that consumes the service it exports (the README's first
// program) sees its own providers leave at Shutdown: empty protection is
// logged at info then, not as a warning.
func TestShutdownOwnProviderLeavingIsNoWarning(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zap.InfoLevel)
	reg := memory.New()
	defer reg.Close()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://own"}},
		Protocols:  map[string]config.ProtocolConfig{"dubbo": {Host: "127.0.0.1"}},
		Services:   map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders"}},
		Logging:    config.LoggingConfig{Level: "info"},
		// Shutdown waits here, after unregistering, until the test saw
		// the empty list reach the reference (it then ends the wait).
		Shutdown: config.ShutdownConfig{Wait: time.Minute},
	}, config.WithRegistry("mem", reg), config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	_, err = app.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	var c ordersClient
	require.NoError(t, app.Refer(ctx, "orders", &c))
	_, err = c.Total(ctx, Order{ID: 1, Items: []string{"a"}}, 1)
	require.NoError(t, err)

	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Shutdown(sctx) }()
	protection := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("empty protection").All() }
	tick := time.NewTicker(5 * time.Millisecond)
	for len(protection()) == 0 && ctx.Err() == nil {
		<-tick.C
	}
	tick.Stop()
	stop() // ends the wait; what is left of Shutdown ends at once
	<-done
	protected := protection()
	require.NotEmpty(t, protected, "the own provider's leaving never reached the reference")
	for _, e := range protected {
		assert.Equal(t, zap.InfoLevel, e.Level, "%s", e.Message)
		assert.Equal(t, true, e.ContextMap()["shutting_down"])
	}
}
