package zookeeper_test

import (
	"context"
	"fmt"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// A provider and a consumer on a three-server ensemble. New does not wait
// for ZooKeeper; Subscribe serves the cached list while it is unreachable.
func Example() {
	reg, err := zookeeper.New("zookeeper://127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183", zookeeper.Options{
		Application:    "greeter-app",
		SessionTimeout: 10 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	ctx := context.Background()
	provider := protocol.NewURL("dubbo", "10.0.0.7", 20880, "demo.Greeter",
		map[string]string{protocol.KeyInterface: "demo.Greeter", protocol.KeyVersion: "1.0"})
	_ = reg.Register(ctx, provider) // /dubbo/demo.Greeter/providers/dubbo%3A%2F%2F10.0.0.7%3A20880...

	consumer := protocol.NewURL("consumer", "10.0.0.9", 0, "demo.Greeter",
		map[string]string{protocol.KeyVersion: "1.0", protocol.KeySide: "consumer"})
	_ = reg.Subscribe(consumer, registry.ListenerFunc(func(providers []*protocol.URL) {
		fmt.Println(len(providers), "providers")
	}))
}

func ExampleParseAddress() {
	a, _ := zookeeper.ParseAddress("zookeeper://admin:secret@zk1:2181,zk2?backup=zk3:2182&session=4000")
	fmt.Println(a.Servers, a.Username, a.Params.Get("session"))
	// Output: [zk1:2181 zk2:2181 zk3:2182] admin 4000
}
