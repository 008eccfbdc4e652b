package registry_test

import (
	"context"
	"fmt"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// Greeter is the provider of the example.
type Greeter struct{ Name string }

func (g Greeter) SayHello(_ context.Context, name string) (string, error) {
	return "hello " + name + " from " + g.Name, nil
}

// What config does for Export and Refer, by hand: two providers serve on
// loopback and register; a consumer's Directory subscribes, turns the
// list into invokers, and a cluster invoker calls them in turn.
func ExampleDirectory() {
	ctx := context.Background()
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	reg := memory.New()
	defer reg.Close()

	// Providers: serve on a free port, register the URL that has the port.
	for _, name := range []string{"a", "b"} {
		u := protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Greeter", nil)
		prov, err := proxy.NewProvider(u, Greeter{Name: name})
		if err != nil {
			panic(err)
		}
		exp, err := p.Export(prov)
		if err != nil {
			panic(err)
		}
		if err := reg.Register(ctx, exp.(*dubbo.Exporter).URL()); err != nil {
			panic(err)
		}
	}

	// Consumer: a directory subscribed to the service, then a cluster.
	consumer := protocol.NewURL("consumer", "127.0.0.1", 0, "demo.Greeter", nil)
	dir, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumer, Protocol: p})
	if err != nil {
		panic(err)
	}
	defer dir.Close()
	if err := reg.Subscribe(consumer, dir); err != nil {
		panic(err)
	}
	if err := dir.WaitReady(ctx); err != nil {
		panic(err)
	}
	fmt.Println(len(dir.Snapshot().Invokers()), "providers")

	o := cluster.DefaultOptions()
	o.LoadBalance = "roundrobin"
	inv, err := cluster.New(dir, o)
	if err != nil {
		panic(err)
	}
	defer inv.Close()
	var g struct {
		SayHello func(ctx context.Context, name string) (string, error)
	}
	if err := proxy.Refer(&g, inv); err != nil {
		panic(err)
	}
	seen := map[string]int{}
	for range 4 {
		reply, err := g.SayHello(ctx, "world")
		if err != nil {
			panic(err)
		}
		seen[reply]++
	}
	fmt.Println(seen)
	// Output:
	// 2 providers
	// map[hello world from a:2 hello world from b:2]
}
