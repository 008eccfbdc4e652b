// Package registry publishes providers and tells consumers about them: the
// Registry interface, the registry directory that turns provider lists into
// invokers for the cluster layer, and the provider cache (memory and disk)
// that keeps calls going while the registry is unreachable. Implementations
// live in registry/zookeeper and registry/memory.
//
// A consumer subscribes a Directory and hands it to the cluster layer:
//
//	reg, _ := zookeeper.New("zookeeper://127.0.0.1:2181", zookeeper.Options{Application: "shop"})
//	dir, _ := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumerURL, Protocol: proto})
//	_ = reg.Subscribe(consumerURL, dir)   // dir is a Listener
//	_ = dir.WaitReady(ctx)                // first list (possibly from the cache file)
//	inv, _ := cluster.New(dir, cluster.Options{LoadBalance: "roundrobin"})
//
// A provider registers its URL and unregisters it before it stops:
//
//	_ = reg.Register(ctx, providerURL)
//	defer reg.Unregister(ctx, providerURL)
//
// Listeners always get complete lists, never deltas. Match decides which
// providers serve a consumer (interface, version, group).
package registry
