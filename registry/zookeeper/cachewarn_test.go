package zookeeper_test

import (
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/internal/zktest"
)

// TestServingFromCacheWarnsOncePerOutage: a consumer whose subscriptions
// are served from the cache file because ZooKeeper is down is told so at
// WARN (seen at the default level), once per outage: the second service
// of the same outage is logged at INFO, and a service subscribed in a
// later outage warns again.
func TestServingFromCacheWarnsOncePerOutage(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svcs := []string{iface(t) + ".A", iface(t) + ".B", iface(t) + ".C"}
	cacheDir := t.TempDir()
	prov := newRegistry(t, zkc.Address(), syncOpts(t, t.TempDir()))
	for i, svc := range svcs {
		if err := prov.Register(ctx, provider(svc, 20801+i)); err != nil {
			t.Fatal(err)
		}
	}
	// A first consumer fills the cache file with the three lists.
	first := newRegistry(t, zkc.Address(), opts(t, cacheDir))
	for i, svc := range svcs {
		rec := newRecorder()
		if err := first.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20801+i))
	}
	first.Close()

	zkc.Servers[0].Kill()
	o := opts(t, cacheDir)
	logs := observe(&o)
	cons := newRegistry(t, zkc.Address(), o)
	cached := func() []observer.LoggedEntry {
		return logs.FilterMessageSnippet("no session; serving providers from the cache").AllUntimed()
	}
	levels := func() []zapcore.Level {
		var out []zapcore.Level
		for _, e := range cached() {
			out = append(out, e.Level)
		}
		return out
	}
	subscribe := func(i int) {
		t.Helper()
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svcs[i]), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20801+i))
	}
	subscribe(0)
	subscribe(1)
	if got := levels(); len(got) != 2 || got[0] != zapcore.WarnLevel || got[1] != zapcore.InfoLevel {
		t.Fatalf("levels of the cache lines in one outage = %v, want [warn info]", got)
	}
	w := cached()[0]
	if !strings.Contains(w.Message, "is ZooKeeper running") || w.ContextMap()["service"] != consumer(svcs[0]).ServiceKey() {
		t.Errorf("warning = %q %v: want the advice and the service", w.Message, w.ContextMap())
	}

	// The outage ends (a session comes) and another begins.
	zkc.Servers[0].Start()
	waitFor(ctx, t, "a session", func() bool { return cons.Stats().HasSession })
	zkc.Servers[0].Kill()
	waitFor(ctx, t, "the session lost", func() bool { return !cons.Stats().HasSession })
	subscribe(2)
	if got := levels(); len(got) != 3 || got[2] != zapcore.WarnLevel {
		t.Fatalf("levels of the cache lines over two outages = %v, want [warn info warn]", got)
	}
}
