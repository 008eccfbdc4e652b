//go:build !benchone || bench_minidubbo || bench_minidubbo_borrow

package main

import (
	"context"
	"net"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// minidubbo through the whole stack an application uses: on the consumer
// the stub, a registry directory (fed by the in-process memory registry,
// into which the provider's URL is registered), failover cluster, random
// balancer, monitor filter and the dubbo protocol over Connections
// connections; on the provider the dubbo protocol, monitor filter and the
// service method. Both sides' monitors count every call.

// EchoService is the provider.
type EchoService struct{}

// Echo replies with its argument.
func (EchoService) Echo(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// echoStub is the consumer stub.
type echoStub struct {
	Echo func(ctx context.Context, b []byte) ([]byte, error)
}

func dubboServe(ln net.Listener) (string, string, error) { return dubboServeImpl(ln, EchoService{}) }

// dubboServeImpl serves impl as the echo service.
func dubboServeImpl(ln net.Listener, impl any) (string, string, error) {
	ln.Close() // the protocol listens on its own port
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "bench-provider"},
		Registries:  map[string]config.RegistryConfig{"mem": {Address: "memory://bench"}},
		Services:    map[string]config.ServiceConfig{"echo": {Interface: "bench.Echo"}},
	}, config.WithRegistry("mem", memory.New()))
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := app.Export(ctx, "echo", impl)
	if err != nil {
		return "", "", err
	}
	return u.Address(), u.String(), nil
}

type dubboClient struct {
	app  *config.Application
	stub echoStub
}

func dubboDial(ctx context.Context, _, info string, conns int) (caller, error) {
	u, err := protocol.ParseURL(info)
	if err != nil {
		return nil, err
	}
	reg := memory.New()
	if err := reg.Register(ctx, u); err != nil {
		return nil, err
	}
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "bench-consumer"},
		Registries:  map[string]config.RegistryConfig{"mem": {Address: "memory://bench"}},
		References:  map[string]config.ReferenceConfig{"echo": {Interface: "bench.Echo", Check: true}},
	}, config.WithRegistry("mem", reg), config.WithProtocolOptions(dubbo.Options{Connections: conns}))
	if err != nil {
		return nil, err
	}
	c := &dubboClient{app: app}
	if err := app.Refer(ctx, "echo", &c.stub); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *dubboClient) Call(ctx context.Context, req []byte) ([]byte, error) {
	return c.stub.Echo(ctx, req)
}

func (c *dubboClient) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.app.Shutdown(ctx)
}
