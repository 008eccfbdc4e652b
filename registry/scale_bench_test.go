package registry_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry"
)

// BenchmarkConsumerMemory is the heap of a consumer that holds 1,000
// providers (addresses) of 100 services each: 100 registry directories,
// one per service, each notified with 1,000 provider URLs parsed from the
// strings a registry delivers, referred by the dubbo protocol (one lazy
// connection pool per address, shared by the services; nothing is
// dialled), and a cluster invoker per service with its picker built.
// Reported as bytes for the whole consumer and per provider URL.
func BenchmarkConsumerMemory(b *testing.B) {
	const services, providers = 100, 1000
	raw := make([][]string, services)
	for s := range raw {
		iface := fmt.Sprintf("com.example.scale.Service%03d", s)
		raw[s] = make([]string, providers)
		for p := range raw[s] {
			raw[s][p] = fmt.Sprintf("dubbo://10.%d.%d.%d:20880/%s?anyhost=true&application=provider-app&"+
				"interface=%s&methods=Find,Get,List,Put&serialization=msgpack&side=provider&timeout=1000&"+
				"timestamp=1700000000%03d&version=1.0.0&weight=100",
				p/250, p/10%25, p%10+1, iface, iface, p%1000)
		}
	}
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		proto, err := dubbo.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		dirs := make([]*registry.Directory, services)
		invs := make([]*cluster.Invoker, services)
		for s := range dirs {
			iface := fmt.Sprintf("com.example.scale.Service%03d", s)
			consumer := protocol.NewURL("consumer", "10.9.9.9", 0, iface, map[string]string{
				protocol.KeyInterface: iface, protocol.KeyVersion: "1.0.0", protocol.KeySide: "consumer"})
			d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumer, Protocol: proto})
			if err != nil {
				b.Fatal(err)
			}
			urls := make([]*protocol.URL, providers)
			for p, r := range raw[s] {
				if urls[p], err = protocol.ParseURL(r); err != nil {
					b.Fatal(err)
				}
			}
			d.Notify(urls)
			if n := len(d.Snapshot().Invokers()); n != providers {
				b.Fatalf("%s: %d invokers, want %d", iface, n, providers)
			}
			c, err := cluster.New(d, cluster.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Pick(&protocol.Invocation{Method: "Get"}, cluster.Tried{}); err != nil {
				b.Fatal(err)
			}
			dirs[s], invs[s] = d, c
		}
		used := heap() - before
		b.ReportMetric(float64(used), "B/consumer")
		b.ReportMetric(float64(used)/(services*providers), "B/provider-url")
		for s := range dirs {
			invs[s].Close()
			dirs[s].Close()
		}
		proto.Close()
	}
}
