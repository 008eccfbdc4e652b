package zookeeper_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// BenchmarkProviderLeave is the time from a provider's node leaving
// ZooKeeper (Unregister deletes it) to the consumer's directory publishing
// a snapshot without it, after which no call can pick it, with 1,000
// providers of the service registered. Each iteration takes one provider
// out and, off the clock, puts it back.
func BenchmarkProviderLeave(b *testing.B) {
	const providers = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	zkc := zktest.Start(b)
	o := func() zookeeper.Options {
		return zookeeper.Options{
			Application: "bench", SessionTimeout: 10 * time.Second,
			RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			CacheFile: filepath.Join(b.TempDir(), "cache.json"),
			Logger:    zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel)),
		}
	}
	prov, err := zookeeper.New(zkc.Address(), o())
	if err != nil {
		b.Fatal(err)
	}
	defer prov.Close()
	cons, err := zookeeper.New(zkc.Address(), o())
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	const svc = "bench.Leave"
	urls := make([]*protocol.URL, providers)
	for i := range urls {
		urls[i] = provider(svc, 30000+i)
		if err := prov.Register(ctx, urls[i]); err != nil {
			b.Fatal(err)
		}
	}
	dir, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumer(svc), Protocol: fakeProtocol{}})
	if err != nil {
		b.Fatal(err)
	}
	defer dir.Close()
	if err := cons.Subscribe(consumer(svc), dir); err != nil {
		b.Fatal(err)
	}
	// has reports whether the directory lists addr, and how many it lists.
	has := func(addr string) (bool, int) {
		invs := dir.Snapshot().Invokers()
		for _, inv := range invs {
			if inv.URL().Address() == addr {
				return true, len(invs)
			}
		}
		return false, len(invs)
	}
	waitUntil := func(cond func() bool) {
		for !cond() {
			select {
			case <-dir.Changed():
			case <-ctx.Done():
				b.Fatal("the directory did not change before the deadline")
			}
		}
	}
	waitUntil(func() bool { _, n := has(""); return n == providers })
	var deleting, notifying time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u := urls[i%providers]
		t0 := time.Now()
		if err := prov.Unregister(ctx, u); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		waitUntil(func() bool { in, _ := has(u.Address()); return !in })
		deleting += t1.Sub(t0)
		notifying += time.Since(t1)
		b.StopTimer()
		if err := prov.Register(ctx, u); err != nil {
			b.Fatal(err)
		}
		waitUntil(func() bool { _, n := has(""); return n == providers })
		b.StartTimer()
	}
	b.StopTimer() // closing the registries (1,000 deletes) is not part of it
	// The two parts: ZooKeeper's delete (its commit), and the watch, the
	// re-list and the directory's new snapshot.
	b.ReportMetric(float64(deleting.Milliseconds())/float64(b.N), "ms-delete/op")
	b.ReportMetric(float64(notifying.Milliseconds())/float64(b.N), "ms-notify/op")
}
