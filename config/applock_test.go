package config_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// gate holds the first call that passes it until open is called, as a
// registry that does not answer: entered is closed when that call begins.
type gate struct {
	once     sync.Once
	openOnce sync.Once
	entered  chan struct{}
	release  chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

// hold holds the first caller until open; later callers pass.
func (g *gate) hold() {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
}

// open lets the held call go on; it may be called more than once.
func (g *gate) open() { g.openOnce.Do(func() { close(g.release) }) }

// waitEntered fails the test with msg if no call reaches the gate in time.
func (g *gate) waitEntered(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// stuckRegistry is a registry whose first Subscribe waits at its gate.
type stuckRegistry struct {
	*memory.Registry
	*gate
}

func (r *stuckRegistry) Subscribe(u *protocol.URL, l registry.Listener) error {
	r.hold()
	return r.Registry.Subscribe(u, l)
}

// While the monitor link looks up the monitor service through a registry
// that does not answer (at the first report), Export and Refer of the
// application's own services through another registry go on: the lookup
// holds no lock of the application.
func TestMonitorLookupDoesNotHoldUpExportAndRefer(t *testing.T) {
	stuck := &stuckRegistry{Registry: memory.New(), gate: newGate()}
	release := stuck.open
	defer release()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{
			"stuck": {Address: "memory://stuck"},
			"mem":   {Address: "memory://mem"},
		},
		Services:   map[string]config.ServiceConfig{"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}}},
		References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}, Check: true}},
		Monitor:    config.MonitorConfig{Registries: []string{"stuck"}, Interval: time.Hour},
	}, config.WithRegistry("stuck", stuck), config.WithRegistry("mem", memory.New()), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	}()

	flushed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		flushed <- app.Reporter().Flush(ctx)
	}()
	stuck.waitEntered(t, "the first report never looked up the monitor service")

	// The monitor lookup is stuck in Subscribe; Export and Refer must not
	// wait for it.
	done := make(chan error, 1)
	var client GreeterClient
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := app.Export(ctx, "greeter", Greeter{}); err != nil {
			done <- err
			return
		}
		done <- app.Refer(ctx, "greeter", &client)
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Export and Refer waited for the monitor lookup stuck in a registry")
	}
	reply, err := client.SayHello(context.Background(), "world")
	require.NoError(t, err)
	require.Equal(t, "hello, world", reply)

	// Once the registry answers, the lookup ends and the report goes out
	// (nobody provides the monitor service: it fails naming that).
	release()
	select {
	case err := <-flushed:
		require.ErrorContains(t, err, "no provider")
	case <-time.After(30 * time.Second):
		t.Fatal("the report did not end after the registry answered")
	}
}

// A Refer waiting for its registry does not hold up the application: an
// Export, another Refer and the /metrics page go on meanwhile, and a
// Shutdown returns; the waiting Refer then fails, saying the application
// is shut down, and leaves its stub untouched.
func TestWaitingReferDoesNotHoldUpTheApplication(t *testing.T) {
	stuck := &stuckRegistry{Registry: memory.New(), gate: newGate()}
	release := stuck.open
	defer release()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{
			"stuck": {Address: "memory://stuck"},
			"mem":   {Address: "memory://mem"},
		},
		Services: map[string]config.ServiceConfig{"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}}},
		References: map[string]config.ReferenceConfig{
			"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}, Check: true},
			"slow":    {Interface: "demo.Greeter", Registries: []string{"stuck"}},
		},
	}, config.WithRegistry("stuck", stuck), config.WithRegistry("mem", memory.New()), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() {
		release()
		_ = app.Shutdown(context.Background())
	}()

	var slow GreeterClient
	slowDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		slowDone <- app.Refer(ctx, "slow", &slow)
	}()
	stuck.waitEntered(t, "the slow Refer never subscribed")

	goesOnPastStuckCall(t, app, "a Refer", release, slowDone)
	assert.Nil(t, slow.SayHello, "a failed Refer leaves the stub untouched")
}

// stuckRegisterRegistry is a registry whose first Register waits at its
// gate.
type stuckRegisterRegistry struct {
	*memory.Registry
	*gate
}

func (r *stuckRegisterRegistry) Register(ctx context.Context, u *protocol.URL) error {
	r.hold()
	return r.Registry.Register(ctx, u)
}

// An Export waiting for its registry does not hold up the application:
// another Export, a Refer and the /metrics page go on meanwhile, and a
// Shutdown returns; the waiting Export then fails, saying the
// application is shut down, and takes its registration back.
func TestWaitingExportDoesNotHoldUpTheApplication(t *testing.T) {
	slowReg := memory.New()
	stuck := &stuckRegisterRegistry{Registry: slowReg, gate: newGate()}
	release := stuck.open
	defer release()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{
			"stuck": {Address: "memory://stuck"},
			"mem":   {Address: "memory://mem"},
		},
		Services: map[string]config.ServiceConfig{
			"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}},
			"slow":    {Interface: "demo.Slow", Registries: []string{"stuck"}},
		},
		References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", Registries: []string{"mem"}, Check: true}},
	}, config.WithRegistry("stuck", stuck), config.WithRegistry("mem", memory.New()), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer func() {
		release()
		_ = app.Shutdown(context.Background())
	}()

	slowDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := app.Export(ctx, "slow", Greeter{})
		slowDone <- err
	}()
	stuck.waitEntered(t, "the slow Export never registered")

	goesOnPastStuckCall(t, app, "an Export", release, slowDone)
	// The registration the slow Export made late is taken back.
	rec := &recordingListener{got: make(chan []*protocol.URL, 1)}
	consumer := protocol.NewURL("consumer", "127.0.0.1", 0, "demo.Slow", map[string]string{protocol.KeyInterface: "demo.Slow"})
	require.NoError(t, slowReg.Subscribe(consumer, rec))
	defer func() { _ = slowReg.Unsubscribe(consumer, rec) }()
	select {
	case urls := <-rec.got:
		assert.Empty(t, urls, "providers of demo.Slow left in the registry")
	case <-time.After(30 * time.Second):
		t.Fatal("no provider list for demo.Slow")
	}
}

// goesOnPastStuckCall checks what the two Waiting... tests share: while
// stuckCall ("a Refer", "an Export") of app waits in its registry, an
// Export and a Refer of "greeter" and the /metrics page go on, the
// greeter answers, and Shutdown returns; then release lets the registry
// answer, and the stuck call, whose result comes on slowDone, fails
// saying the application is shut down.
func goesOnPastStuckCall(t *testing.T, app *config.Application, stuckCall string, release func(), slowDone <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	var client GreeterClient
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := app.Export(ctx, "greeter", Greeter{}); err != nil {
			done <- err
			return
		}
		if err := app.Refer(ctx, "greeter", &client); err != nil {
			done <- err
			return
		}
		rec := httptest.NewRecorder()
		app.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			done <- fmt.Errorf("/metrics: %d", rec.Code)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Export, Refer and /metrics waited for %s stuck in its registry", stuckCall)
	}
	reply, err := client.SayHello(context.Background(), "world")
	require.NoError(t, err)
	require.Equal(t, "hello, world", reply)

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- app.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Shutdown waited for %s stuck in its registry", stuckCall)
	}
	release()
	select {
	case err := <-slowDone:
		require.ErrorContains(t, err, "application is shut down")
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow call (%s) did not end once its registry answered", stuckCall)
	}
}

// recordingListener passes on the first provider list it gets.
type recordingListener struct {
	once sync.Once
	got  chan []*protocol.URL
}

func (l *recordingListener) Notify(urls []*protocol.URL) {
	l.once.Do(func() { l.got <- urls })
}
