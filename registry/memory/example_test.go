package memory_test

import (
	"context"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

func Example() {
	ctx := context.Background()
	reg := memory.New()
	defer reg.Close()
	consumer := protocol.NewURL("consumer", "127.0.0.1", 0, "demo.Greeter", map[string]string{"version": "1.0"})
	lists := make(chan []*protocol.URL, 4)
	_ = reg.Subscribe(consumer, registry.ListenerFunc(func(ps []*protocol.URL) { lists <- ps }))
	fmt.Println(len(<-lists), "providers")

	_ = reg.Register(ctx, protocol.NewURL("dubbo", "10.0.0.1", 20880, "demo.Greeter", map[string]string{"version": "1.0"}))
	for _, p := range <-lists {
		fmt.Println(p.Address())
	}
	// Output:
	// 0 providers
	// 10.0.0.1:20880
}
