package config_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/status"
)

// newerOrder is what a newer consumer sends: a field the provider's Order
// does not have.
type newerOrder struct {
	ID       int64    `msgpack:"id"`
	Items    []string `msgpack:"items"`
	Priority int      `msgpack:"priority"`
}

type newerOrdersClient struct {
	Total func(ctx context.Context, ord newerOrder, factor int) (int, error)
}

// A struct argument with a key the provider's struct lacks is rejected by
// default, naming the key; unknown_fields: ignore accepts it.
func TestUnknownFieldsRejectedByDefault(t *testing.T) {
	ctx := testCtx(t)
	for _, mode := range []string{"", "ignore"} {
		reg := memory.New()
		c := &config.Config{
			Application: config.ApplicationConfig{UnknownFields: mode},
			Registries:  map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
			Services:    map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
			References:  map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", Check: true}},
		}
		app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
		require.NoError(t, err)
		_, err = app.Export(ctx, "orders", &orders{})
		require.NoError(t, err)
		var client newerOrdersClient
		require.NoError(t, app.Refer(ctx, "orders", &client))
		n, err := client.Total(ctx, newerOrder{ID: 1, Items: []string{"a", "b"}, Priority: 3}, 2)
		if mode == "" {
			require.ErrorIs(t, err, status.ErrBadRequest)
			assert.Contains(t, err.Error(), "unknown field", err.Error())
			assert.Contains(t, err.Error(), "priority")
		} else {
			require.NoError(t, err)
			assert.Equal(t, 4, n)
		}
		require.NoError(t, app.Shutdown(context.Background()))
		reg.Close()
	}
	_, err := config.New(&config.Config{Application: config.ApplicationConfig{UnknownFields: "ignor"}})
	assert.ErrorContains(t, err, `application.unknown_fields "ignor": unknown; did you mean "ignore"? (known: reject, ignore)`)
}
