package registry_test

import (
	"context"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
)

// A program that consumes a service it also provides tells its
// directories that it is shutting down before it unregisters (config's
// Shutdown does): the empty list that follows is its own doing, and empty
// protection, which still keeps the healthy provider, logs it at info.
func ExampleDirectory_ShuttingDown() {
	ctx := context.Background()
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Greeter", nil), Greeter{Name: "self"})
	if err != nil {
		panic(err)
	}
	exp, err := p.Export(prov)
	if err != nil {
		panic(err)
	}
	consumer := protocol.NewURL("consumer", "127.0.0.1", 0, "demo.Greeter", nil)
	dir, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumer, Protocol: p})
	if err != nil {
		panic(err)
	}
	defer dir.Close()
	dir.Notify([]*protocol.URL{exp.(*dubbo.Exporter).URL()})
	var g struct {
		SayHello func(ctx context.Context, name string) (string, error)
	}
	if err := proxy.Refer(&g, dir.Snapshot().Invokers()[0]); err != nil {
		panic(err)
	}
	reply, err := g.SayHello(ctx, "me") // the connection is up: healthy
	fmt.Println(reply, err)

	dir.ShuttingDown()
	dir.Notify(nil) // its own provider unregistered
	fmt.Println(len(dir.Snapshot().Invokers()), "kept;", dir.EmptyProtected(), "empty list overridden")
	// Output:
	// hello me from self <nil>
	// 1 kept; 1 empty list overridden
}
