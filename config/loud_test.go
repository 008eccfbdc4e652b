package config_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// closedAddress returns a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func unreachableConfig(t *testing.T, check *bool) (*config.Config, string) {
	addr := "zookeeper://" + closedAddress(t)
	return &config.Config{
		Registries: map[string]config.RegistryConfig{"zk": {Address: addr, Timeout: 300 * time.Millisecond, CacheFile: "-", Check: check}},
		Services:   map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders"}},
	}, addr
}

// A provider whose registry cannot be reached fails Export, naming the
// registry, instead of serving unregistered.
func TestExportFailsWhenRegistryUnreachable(t *testing.T) {
	ctx := testCtx(t)
	c, addr := unreachableConfig(t, nil)
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	_, err = app.Export(ctx, "orders", &orders{})
	require.ErrorIs(t, err, config.ErrRegistryUnreachable)
	assert.EqualError(t, err, "config: export orders: registry unreachable: registry zk ("+addr+") did not answer within 300ms; "+
		"service orders not registered (is the registry running at that address? "+
		"Or set registries.zk.check: false to register in the background once it answers)")
	var ke *config.KeyError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, "registries.zk.address", ke.Key)
	// A program with its own advice drops config's; the chain stays.
	bare := config.WithoutAdvice(err)
	assert.EqualError(t, bare, "config: export orders: registry unreachable: registry zk ("+addr+") did not answer within 300ms; "+
		"service orders not registered")
	assert.ErrorIs(t, bare, config.ErrRegistryUnreachable)
}

// With check: false, Export serves and registers in the background.
func TestExportCheckFalseRegistersInBackground(t *testing.T) {
	ctx := testCtx(t)
	no := false
	c, _ := unreachableConfig(t, &no)
	core, logs := observer.New(zap.WarnLevel)
	app, err := config.New(c, config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	u, err := app.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	assert.NotZero(t, u.Port)
	assert.Equal(t, 1, logs.FilterMessage("zookeeper: no session; registration continues in the background").Len())
}

// A consumer whose registry cannot be reached and which has no cache is
// told so: by Refer's error with check, by a warning and by every call's
// error without.
func TestReferUnreachableRegistrySaysSo(t *testing.T) {
	ctx := testCtx(t)
	yes := true
	c, addr := unreachableConfig(t, nil)
	r := c.References["orders"]
	r.Check = yes
	c.References["orders"] = r
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	var client ordersClient
	err = app.Refer(ctx, "orders", &client)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.Regexp(t, `^config: refer orders: check: .*; asked registry zk: `+addr+` \(not connected for [\d.]+m?s; never listed the providers\) `+
		`\(is the registry running at that address\? Providers are found only once it answers\)$`, err.Error())
	require.NoError(t, app.Shutdown(context.Background()))

	c, addr = unreachableConfig(t, nil)
	core, logs := observer.New(zap.WarnLevel)
	app, err = config.New(c, config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	require.NoError(t, app.Refer(ctx, "orders", &client))
	warn := logs.FilterMessageSnippet("no provider list yet").All()
	require.Len(t, warn, 1)
	assert.Contains(t, warn[0].ContextMap()["registries"], "registry zk: "+addr+" (not connected")
	_, err = client.Tag(ctx)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.Regexp(t, `^cluster: no provider for service test\.Orders \(method Tag\); asked registry zk: `+addr+` \(not connected for [\d.]+m?s; never listed the providers\) `+
		`\(is the registry running at that address\? Providers are found only once it answers\)$`, err.Error())
}

// "No provider" says which registry was asked and which versions and
// groups of the interface it lists.
func TestNoProviderListsRegisteredVersions(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	for i := range 2 {
		prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders", Version: "1.0"}, config.ReferenceConfig{})
		_, err := prov.Export(ctx, "orders", &orders{})
		require.NoError(t, err, i)
	}
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders", Version: "2.0", Group: "eu"}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", &orders{})
	require.NoError(t, err)

	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders"})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	_, err = c.Tag(ctx)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.EqualError(t, err, `cluster: no provider for service test.Orders (method Tag); asked registry mem: memory:// `+
		`(connected; registered: version "1.0" on 2 providers, version "2.0" group "eu" on 1 provider)`)

	cons = memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", Check: true})
	err = cons.Refer(ctx, "orders", &c)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.EqualError(t, err, `config: refer orders: check: cluster: no provider test.Orders; asked registry mem: memory:// `+
		`(connected; registered: version "1.0" on 2 providers, version "2.0" group "eu" on 1 provider)`)
}

// A call to an interface nobody registered says so and what to check;
// when other versions are registered, the list of them is the hint.
func TestNoProviderOfAnyVersionSaysWhatToDo(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Nobody"})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	_, err := c.Tag(ctx)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
	assert.EqualError(t, err, `cluster: no provider for service test.Nobody (method Tag); asked registry mem: memory:// `+
		`(connected; registered: no provider of any version) (is a provider of test.Nobody running? Its interface name must be this one exactly)`)
}
