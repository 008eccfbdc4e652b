package config_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// TestEmptyProtectionKeepsHealthyProvider: the registry stops listing the
// only provider while its connection is healthy; the consumer keeps
// calling it (EmptyProtection shows it), and with empty_protection off
// it does not.
func TestEmptyProtectionKeepsHealthyProvider(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			ctx := testCtx(t)
			reg := memory.New()
			defer reg.Close()
			prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{})
			u, err := prov.Export(ctx, "orders", &orders{})
			require.NoError(t, err)
			cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", Check: true, EmptyProtection: &on})
			var c ordersClient
			require.NoError(t, cons.Refer(ctx, "orders", &c))
			n, err := c.Total(ctx, Order{Items: []string{"a"}}, 2)
			require.NoError(t, err)
			require.Equal(t, 2, n)

			// The registry says: no provider (the provider still serves).
			require.NoError(t, reg.Unregister(ctx, u))
			if !on {
				require.Eventually(t, func() bool {
					_, err := c.Total(ctx, Order{}, 1)
					return err != nil
				}, 10*time.Second, 5*time.Millisecond)
				require.Empty(t, cons.EmptyProtection())
				return
			}
			require.Eventually(t, func() bool { return len(cons.EmptyProtection()["orders"]) == 1 }, 10*time.Second, time.Millisecond)
			require.Equal(t, map[string][]string{"orders": {u.Address()}}, cons.EmptyProtection())
			require.Contains(t, metricsPage(t, cons), `minidubbo_empty_protected_providers{reference="orders",service="test.Orders"} 1`+"\n")
			for range 20 {
				n, err := c.Total(ctx, Order{Items: []string{"a", "b"}}, 1)
				require.NoError(t, err)
				require.Equal(t, 2, n)
			}
			// A non-empty list ends protection.
			require.NoError(t, reg.Register(ctx, u))
			require.Eventually(t, func() bool { return len(cons.EmptyProtection()) == 0 }, 10*time.Second, time.Millisecond)
			require.Contains(t, metricsPage(t, cons), `minidubbo_empty_protected_providers{reference="orders",service="test.Orders"} 0`+"\n")
			_, err = c.Total(ctx, Order{}, 1)
			require.NoError(t, err)
		})
	}
}

// metricsPage returns the application's /metrics page.
func metricsPage(t *testing.T, app *config.Application) string {
	t.Helper()
	rec := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}
