package config_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
)

// A consumer refers two services through one ZooKeeper registry; one of
// them has 20,000 providers (about 4.9 MB of names) under its providers
// node, more than the consumer's 2 MiB buffer. Calls to the other service
// keep working and its provider changes keep arriving; the big service's
// reference reports no provider instead of breaking the session.
func TestE2EBigProvidersNodeDoesNotBreakOtherServices(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	const big = "e2e.Big"
	bigPath := "/dubbo/" + big + "/providers"
	for _, p := range []string{"/dubbo", "/dubbo/" + big, bigPath} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	names := make([]string, 20000)
	for j := range names {
		u := protocol.NewURL("dubbo", fmt.Sprintf("10.%d.%d.%d", j>>16, (j>>8)&255, j&255), 20880, big,
			map[string]string{protocol.KeyInterface: big, "pad": strings.Repeat("p", 150)})
		names[j] = u.Escaped()
	}
	if err := zktest.CreateChildren(raw, bigPath, names); err != nil {
		t.Fatal(err)
	}

	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	waitProviders(ctx, t, raw, addrA)

	rc := registryConfig(zkc.Address(), t.TempDir())
	rc.ZooKeeper.MaxBufferSize, rc.ZooKeeper.MaxChildren = 2<<20, 100000
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "e2e-consumer"},
		Registries:  map[string]config.RegistryConfig{"zk": rc},
		References: map[string]config.ReferenceConfig{
			"big":   {Interface: big, Timeout: 2 * time.Second},
			"named": {Interface: e2eInterface, LoadBalance: "roundrobin", Timeout: 2 * time.Second},
		},
	}, config.WithLogger(logger(t).Named("consumer")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	var bigClient, c namedClient
	if err := app.Refer(ctx, "big", &bigClient); err != nil {
		t.Fatal(err)
	}
	if err := app.Refer(ctx, "named", &c); err != nil {
		t.Fatal(err)
	}
	l := startLoad(ctx, &c, 2)
	l.waitServedBy(ctx, t, "A")
	// A provider arriving later is seen: the watches of the session work.
	startProvider(ctx, t, zkc.Address(), "B")
	l.waitServedBy(ctx, t, "A", "B")
	l.waitCalls(ctx, t, 200)
	l.requireNoFailures(t)
	// The big service was skipped, not half-listed: no provider to call.
	if who, err := bigClient.Who(ctx, 1); err == nil {
		t.Fatalf("a call to the skipped service was answered by %q", who)
	}
}
