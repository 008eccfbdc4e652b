package config_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// echoProto is a protocol whose invokers answer in place: the reply is
// the argument, stored through the invocation's Reply pointer, so that a
// call costs only the consumer's layers above the protocol.
type echoProto struct{}

func (echoProto) Export(protocol.Invoker) (protocol.Exporter, error) { return nil, nil }
func (echoProto) Close() error                                       { return nil }
func (echoProto) Refer(u *protocol.URL) (protocol.Invoker, error) {
	return protocol.InvokerFunc{U: u, F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if p, ok := inv.Reply.(*[]byte); ok {
			*p = inv.Args[0].([]byte)
		}
		res := inv.NewResult()
		res.Value = inv.Reply
		return res, nil
	}}, nil
}

type bytesClient struct {
	Echo func(ctx context.Context, b []byte) ([]byte, error)
}

// BenchmarkConsumerLayers is one call through the consumer's layers above
// the protocol, as the bench module's load client makes it (stub, call
// counting, cluster with failover and the random balancer over a registry
// directory, attempt counting), to a protocol that answers in place: what
// the consumer spends per call besides the exchange and the wire.
func BenchmarkConsumerLayers(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reg := memory.New()
	defer reg.Close()
	// A start time, as every exported provider's URL has (the balancers
	// weigh a provider up over its first minutes).
	u := protocol.NewURL("echo", "127.0.0.1", 1, "bench.Echo", map[string]string{protocol.KeyInterface: "bench.Echo",
		protocol.KeyTimestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)})
	if err := reg.Register(ctx, u); err != nil {
		b.Fatal(err)
	}
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "bench-consumer"},
		Registries:  map[string]config.RegistryConfig{"mem": {Address: "memory://bench"}},
		References:  map[string]config.ReferenceConfig{"echo": {Interface: "bench.Echo", Check: true}},
	}, config.WithRegistry("mem", reg), config.WithProtocol("echo", func(protocol.Settings) (protocol.Protocol, error) { return echoProto{}, nil }))
	if err != nil {
		b.Fatal(err)
	}
	defer app.Shutdown(context.Background())
	var c bytesClient
	if err := app.Refer(ctx, "echo", &c); err != nil {
		b.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 581)
	call := func() {
		r, err := c.Echo(ctx, payload)
		if err != nil || len(r) != len(payload) {
			b.Errorf("reply of %d bytes, %v", len(r), err)
		}
	}
	call()
	b.Run("c1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			call()
		}
	})
	b.Run("c16", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call()
			}
		})
	})
}
