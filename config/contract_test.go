package config_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// badOrdersClient disagrees with the orders service: Total takes a string
// where the provider takes an Order, and Cancel does not exist.
type badOrdersClient struct {
	Total  func(ctx context.Context, ord string, factor int) (int, error)
	Cancel func(ctx context.Context, id int64) error
}

func TestReferChecksContract(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{})
	u, err := prov.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	assert.Equal(t, "Echo(*Order)*Order;Slow()string;Tag()string;Total(Order,int)int", u.Param(proxy.KeySignatures, ""))

	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders"})
	var bad badOrdersClient
	err = cons.Refer(ctx, "orders", &bad)
	require.ErrorIs(t, err, proxy.ErrContract)
	assert.Equal(t, "config: refer orders: contract mismatch: test.Orders stub vs provider "+u.Address()+": "+
		"stub Total argument 1 is string, the provider expects Order: Total(Order, int) (int, error); "+
		"the provider has no method Cancel (it has: Echo, Slow, Tag, Total) "+
		"(set references.orders.contract: warn to call anyway)", err.Error())
	assert.Nil(t, bad.Total, "the stub is not filled")

	// A matching stub refers fine.
	var good ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &good))

	// warn: Refer succeeds and says why calls will fail.
	core, logs := observer.New(zap.WarnLevel)
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", Contract: "warn"}},
	}
	warnApp, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer warnApp.Shutdown(context.Background())
	require.NoError(t, warnApp.Refer(ctx, "orders", &bad))
	w := logs.FilterMessageSnippet("stub does not match").All()
	require.Len(t, w, 1)
	assert.Contains(t, w[0].ContextMap()["error"], "the provider has no method Cancel")
}

func TestContractAndMethodsValidated(t *testing.T) {
	reg := memory.New()
	defer reg.Close()
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", Contract: "warning"}},
	}
	_, err := config.New(c, config.WithRegistry("mem", reg))
	assert.ErrorContains(t, err, `references.orders.contract "warning": unknown; did you mean "warn"? (known: fail, warn, off)`)

	// methods: keys must name methods of the stub.
	c.References["orders"] = config.ReferenceConfig{Interface: "test.Orders", Methods: map[string]config.MethodConfig{
		"Totl": {Timeout: time.Second}, "Slow": {Timeout: time.Second},
	}}
	app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	var client ordersClient
	err = app.Refer(testCtx(t), "orders", &client)
	assert.EqualError(t, err, `config: references.orders.methods.Totl: the stub has no method "Totl"; did you mean "Total"? (methods: Echo, Slow, Tag, Total)`)

	// A service without an interface is an error at New.
	_, err = config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"greeter": {}},
	})
	assert.ErrorContains(t, err, "config: services.greeter.interface is empty: name the service's interface, such as demo.Greeter")
}
