package config_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

type Order struct {
	ID    int64             `msgpack:"id"`
	Items []string          `msgpack:"items"`
	Meta  map[string]string `msgpack:"meta"`
}

type orders struct {
	block   chan struct{}
	started chan struct{}
}

func (o *orders) Total(_ context.Context, ord Order, factor int) (int, error) {
	return len(ord.Items) * factor, nil
}

func (o *orders) Echo(_ context.Context, ord *Order) (*Order, error) { return ord, nil }

func (o *orders) Slow(ctx context.Context) (string, error) {
	o.started <- struct{}{}
	select {
	case <-o.block:
		return "done", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (o *orders) Tag(ctx context.Context) (string, error) {
	v, _ := service.Attachment(ctx, "from")
	return v, nil
}

type ordersClient struct {
	Total func(ctx context.Context, ord Order, factor int) (int, error)
	Echo  func(ctx context.Context, ord *Order) (*Order, error)
	Slow  func(ctx context.Context) (string, error)
	Tag   func(ctx context.Context) (string, error)
}

func memoryApp(t *testing.T, reg *memory.Registry, svc config.ServiceConfig, ref config.ReferenceConfig) *config.Application {
	t.Helper()
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
	}
	if svc.Interface != "" {
		c.Services = map[string]config.ServiceConfig{"orders": svc}
	}
	if ref.Interface != "" {
		c.References = map[string]config.ReferenceConfig{"orders": ref}
	}
	app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	return app
}

// ordersApps exports orders from one application (prov) on a memory
// registry and makes another (cons) that refers them (Check: true)
// through it.
func ordersApps(ctx context.Context, t *testing.T) (prov, cons *config.Application) {
	t.Helper()
	reg := memory.New()
	t.Cleanup(func() { _ = reg.Close() })
	prov = memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	return prov, memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", Check: true})
}

// Struct, pointer and map arguments reach the provider in their declared
// types through the filter chain config builds.
func TestExportReferStructArguments(t *testing.T) {
	ctx := testCtx(t)
	prov, cons := ordersApps(ctx, t)
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))

	n, err := c.Total(ctx, Order{ID: 1, Items: []string{"a", "b", "c"}}, 2)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	in := &Order{ID: 7, Items: []string{"x"}, Meta: map[string]string{"k": "v"}}
	out, err := c.Echo(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	tag, err := c.Tag(service.WithAttachment(ctx, "from", "tester"))
	require.NoError(t, err)
	assert.Equal(t, "tester", tag)

	// Both sides counted the calls.
	var provCalls, consCalls int64
	for _, s := range prov.Monitor().Snapshot() {
		provCalls += s.Calls
	}
	var consAttempts int64
	for _, s := range cons.Monitor().Snapshot() {
		if s.Provider == "" {
			consCalls += s.Calls
		} else {
			consAttempts += s.Calls
		}
	}
	assert.Equal(t, int64(3), provCalls)
	assert.Equal(t, int64(3), consCalls, "calls, above the cluster")
	assert.Equal(t, int64(3), consAttempts, "attempts, per provider")
}

// A token on the service: callers through the registry carry it; a caller
// that bypasses the registry without it is refused.
func TestTokenChecked(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders", Token: "true"}, config.ReferenceConfig{})
	u, err := prov.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	require.Len(t, u.Param("token", ""), 32)

	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", Check: true})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	_, err = c.Tag(ctx)
	require.NoError(t, err)

	direct := memoryApp(t, memory.New(), config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", URL: u.Address()})
	var d ordersClient
	require.NoError(t, direct.Refer(ctx, "orders", &d))
	_, err = d.Tag(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid token")
}

// executes bounds concurrent calls of a service: the call over the bound
// is answered "server busy" and is not retried into success on the same
// single provider.
func TestExecutesLimit(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	o := &orders{block: make(chan struct{}), started: make(chan struct{}, 4)}
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders", Executes: 1}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", o)
	require.NoError(t, err)
	zero := 0
	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders", Check: true, Retries: &zero, Timeout: 10 * time.Second})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))

	var wg sync.WaitGroup
	var first error
	wg.Go(func() { _, first = c.Slow(ctx) })
	<-o.started
	_, err = c.Slow(ctx)
	require.Error(t, err)
	assert.True(t, errors.Is(err, status.ErrServerBusy), "got %v", err)
	close(o.block)
	wg.Wait()
	require.NoError(t, first)
}

// Per-method timeout overrides the reference's.
func TestMethodTimeout(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	o := &orders{block: make(chan struct{}), started: make(chan struct{}, 4)}
	defer close(o.block)
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", o)
	require.NoError(t, err)
	zero := 0
	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{
		Interface: "test.Orders", Check: true, Retries: &zero, Timeout: time.Minute,
		Methods: map[string]config.MethodConfig{"Slow": {Timeout: 100 * time.Millisecond}},
	})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	connected(t, func() error { _, err := c.Tag(ctx); return err })
	_, err = c.Slow(ctx)
	requireTimeout(t, err, "100ms", "method timeout")
}

// connected makes calls (call) until one succeeds: the connection to the
// provider is then up, so that a short timeout the test looks at next
// bounds the call only. Since a call's timeout also bounds its wait for
// the first dial, a first call of 100 ms could otherwise end "the call's
// timeout ran out while connecting" on a loaded machine, which is not the
// timeout under test.
func connected(t *testing.T, call func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := call()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call got through in 30 s: %v", err)
		}
		<-time.After(10 * time.Millisecond) // the dial goes on meanwhile
	}
}

// requireTimeout checks that err is the one timeout error, saying how long
// and which setting, whichever side fired first.
func requireTimeout(t *testing.T, err error, after, setting string) {
	t.Helper()
	require.ErrorIs(t, err, status.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Regexp(t, `^cluster: failover test\.Orders\.Slow: 1 attempt failed: attempt 1 on 127\.0\.0\.1:\d+: `+
		`test\.Orders\.Slow timed out after `+after+` on the (consumer calling|provider) 127\.0\.0\.1:\d+ \(`+setting+`\)$`, err.Error())
}

// The timeout error names the reference's timeout, or the provider's
// advertised one when the reference sets none.
func TestTimeoutErrorNamesTheSetting(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	o := &orders{block: make(chan struct{}), started: make(chan struct{}, 4)}
	defer close(o.block)
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders", Timeout: 400 * time.Millisecond}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", o)
	require.NoError(t, err)
	zero := 0
	for _, c := range []struct {
		timeout        time.Duration
		after, setting string
	}{
		{150 * time.Millisecond, "150ms", "reference timeout"},
		{0, "400ms", "provider's advertised timeout"},
	} {
		cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{
			Interface: "test.Orders", Check: true, Retries: &zero, Timeout: c.timeout,
		})
		var client ordersClient
		require.NoError(t, cons.Refer(ctx, "orders", &client))
		connected(t, func() error { _, err := client.Tag(ctx); return err })
		_, err = client.Slow(ctx)
		requireTimeout(t, err, c.after, c.setting)
	}
}

// Unknown ids and names are errors listing the known ones.
func TestUnknownNames(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	app := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Orders"}, config.ReferenceConfig{Interface: "test.Orders"})
	_, err := app.Export(ctx, "nope", &orders{})
	require.ErrorContains(t, err, `unknown service "nope" (known: orders)`)
	var c ordersClient
	require.ErrorContains(t, app.Refer(ctx, "nope", &c), `unknown reference "nope" (known: orders)`)

	_, err = config.New(&config.Config{References: map[string]config.ReferenceConfig{
		"x": {URL: "127.0.0.1:1", LoadBalance: "fastest"},
	}})
	require.ErrorContains(t, err, `references.x.loadbalance: unknown "fastest" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`)
	_, err = config.New(&config.Config{References: map[string]config.ReferenceConfig{
		"x": {URL: "127.0.0.1:1", Cluster: "retry"},
	}})
	require.ErrorContains(t, err, `references.x.cluster: unknown "retry" (known: broadcast, failback, failfast, failover, failsafe, forking)`)
}

// A generic client calls by method name with plain arguments.
func TestReferGeneric(t *testing.T) {
	ctx := testCtx(t)
	_, cons := ordersApps(ctx, t)
	g, err := cons.ReferGeneric(ctx, "orders")
	require.NoError(t, err)
	v, err := g.Invoke(ctx, "Total", []any{map[string]any{"id": 1, "items": []any{"a", "b"}}, 3})
	require.NoError(t, err)
	assert.EqualValues(t, 6, v)
	_, err = g.Invoke(ctx, "Nope", nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, status.ErrServiceNotFound)
	assert.Contains(t, err.Error(), "Nope")
}

// A condition rule from the reference's config sends matching calls to the
// providers it names.
func TestConfiguredRouter(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	var ports []int
	for _, name := range []string{"A", "B"} {
		app, err := config.New(&config.Config{
			Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
			Services:   map[string]config.ServiceConfig{"named": {Interface: e2eInterface}},
		}, config.WithRegistry("mem", reg))
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
		u, err := app.Export(ctx, "named", named{name: name})
		require.NoError(t, err)
		ports = append(ports, u.Port)
	}
	cons, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		References: map[string]config.ReferenceConfig{"named": {
			Interface: e2eInterface, Check: true, LoadBalance: "roundrobin",
			Routers: []string{fmt.Sprintf("method = Who => port = %d", ports[1])},
		}},
	}, config.WithRegistry("mem", reg))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cons.Shutdown(context.Background()) })
	var c namedClient
	require.NoError(t, cons.Refer(ctx, "named", &c))
	for i := range 20 {
		reply, err := c.Who(ctx, int64(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("B:%d", i), reply)
	}

	// A rule that does not parse is an error at Refer, naming where it is.
	bad, err := config.New(&config.Config{References: map[string]config.ReferenceConfig{
		"x": {URL: "127.0.0.1:1", Routers: []string{"method = => =>"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bad.Shutdown(context.Background()) })
	var c2 namedClient
	require.ErrorContains(t, bad.Refer(ctx, "x", &c2), "references.x.routers[0]")
}

// firstBalancer always picks the first provider of the list.
type firstBalancer struct{ picks *atomic.Int64 }

func (f firstBalancer) Build([]protocol.Invoker) loadbalance.Picker { return f }

func (f firstBalancer) Pick(*protocol.Invocation, loadbalance.Exclude) (int, error) {
	f.picks.Add(1)
	return 0, nil
}

// A load balancer added by name is used by references that name it.
func TestUserLoadBalance(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	var picks atomic.Int64
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
		References: map[string]config.ReferenceConfig{"orders": {Interface: "test.Orders", LoadBalance: "first", Check: true}},
	}, config.WithRegistry("mem", reg), config.WithLoadBalance("first", func(loadbalance.Options) loadbalance.LoadBalance {
		return firstBalancer{&picks}
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	_, err = app.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	var c ordersClient
	require.NoError(t, app.Refer(ctx, "orders", &c))
	for range 3 {
		_, err := c.Tag(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), picks.Load())
}
