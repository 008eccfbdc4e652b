package proxy_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
)

// Greeter is a provider: its exported methods take a context first and
// return (T, error) or error.
type Greeter struct{}

// SayHello greets name.
func (Greeter) SayHello(_ context.Context, name string) (string, error) {
	return "hello, " + name, nil
}

// Divide returns a/b, or a business error when b is 0.
func (Greeter) Divide(_ context.Context, a, b int) (int, error) {
	if b == 0 {
		return 0, service.Errorf(service.CodeInvalidArgument, "cannot divide %d by zero", a)
	}
	return a / b, nil
}

// GreeterClient is the consumer stub: proxy.Refer fills its func fields.
type GreeterClient struct {
	SayHello func(ctx context.Context, name string) (string, error)
	Divide   func(ctx context.Context, a, b int) (int, error)
}

// exportAndRefer serves impl on a free loopback port and returns an invoker
// referring it.
func exportAndRefer(p *dubbo.Protocol, impl any) (protocol.Invoker, error) {
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "demo.Greeter", nil)
	provider, err := proxy.NewProvider(u, impl)
	if err != nil {
		return nil, err
	}
	exp, err := p.Export(provider)
	if err != nil {
		return nil, err
	}
	return p.Refer(exp.(*dubbo.Exporter).URL())
}

// A provider and a consumer in one process, over the dubbo protocol on a
// loopback port.
func Example() {
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	inv, err := exportAndRefer(p, Greeter{})
	if err != nil {
		panic(err)
	}

	var greeter GreeterClient
	if err := proxy.Refer(&greeter, inv); err != nil {
		panic(err)
	}
	reply, err := greeter.SayHello(context.Background(), "world")
	fmt.Println(reply, err)
	// Output: hello, world <nil>
}

// A business error with a code crosses the wire and is recovered with
// errors.As on the consumer.
func Example_errors() {
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	inv, err := exportAndRefer(p, Greeter{})
	if err != nil {
		panic(err)
	}
	var greeter GreeterClient
	if err := proxy.Refer(&greeter, inv); err != nil {
		panic(err)
	}

	_, err = greeter.Divide(context.Background(), 1, 0)
	var e *service.Error
	if errors.As(err, &e) {
		fmt.Printf("code: %d (%s)\n", e.Code, e.Code)
		fmt.Println("message:", e.Message)
		fmt.Println("remote:", e.Remote)
	}
	// Output:
	// code: 3 (invalid argument)
	// message: cannot divide 1 by zero
	// remote: true
}

// Generic invocation calls a method by name, for tools without the
// service's Go types.
func ExampleGeneric() {
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	inv, err := exportAndRefer(p, Greeter{})
	if err != nil {
		panic(err)
	}
	g, err := proxy.NewGeneric(inv)
	if err != nil {
		panic(err)
	}
	v, err := g.Invoke(context.Background(), "Divide", []any{9, 3})
	fmt.Println(v, err)
	v, err = g.Invoke(context.Background(), service.EchoMethod, []any{"ping"})
	fmt.Println(v, err)
	// Output:
	// 3 <nil>
	// ping <nil>
}
