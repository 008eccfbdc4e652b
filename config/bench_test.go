package config_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

type echoer struct{}

func (echoer) Echo(_ context.Context, s string) (string, error) { return s, nil }

type echoClient struct {
	Echo func(ctx context.Context, s string) (string, error)
}

// BenchmarkApplicationCall is one call of a 581-byte string, echoed, the
// way an application makes it: stub, per-method options, cluster (router,
// random load balancer, failover), consumer monitor, protocol/dubbo over
// loopback, and on the provider the monitor and the service method. Both
// sides run in this process, so allocs/op counts both.
func BenchmarkApplicationCall(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reg := memory.New()
	defer reg.Close()
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://bench"}},
		Services:   map[string]config.ServiceConfig{"echo": {Interface: "bench.Echo"}},
		References: map[string]config.ReferenceConfig{"echo": {Interface: "bench.Echo", Check: true}},
	}, config.WithRegistry("mem", reg))
	if err != nil {
		b.Fatal(err)
	}
	defer app.Shutdown(context.Background())
	if _, err := app.Export(ctx, "echo", echoer{}); err != nil {
		b.Fatal(err)
	}
	var c echoClient
	if err := app.Refer(ctx, "echo", &c); err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("x", 581)
	call := func() {
		s, err := c.Echo(ctx, payload)
		if err != nil || len(s) != len(payload) {
			b.Errorf("reply of %d bytes, %v", len(s), err)
		}
	}
	call()
	b.Run("c1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			call()
		}
	})
	b.Run("c100", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism((100 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call()
			}
		})
	})
}
