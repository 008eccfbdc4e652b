// Command consumer calls demo.Greeter at a provider's address, with no
// registry:
//
//	go run ./examples/direct/consumer -addr 127.0.0.1:20880 -name world
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/minidubbo/minidubbo/examples/direct/greeter"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:20880", "provider `host:port`")
	name := flag.String("name", "world", "who to greet")
	timeout := flag.Duration("timeout", 5*time.Second, "bound on the whole run")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *addr, *name); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, name string) error {
	u, err := greeter.URL(addr)
	if err != nil {
		return err
	}
	p, err := dubbo.New(nil)
	if err != nil {
		return err
	}
	defer p.Close()

	inv, err := p.Refer(u)
	if err != nil {
		return err
	}
	var g greeter.Client
	if err := proxy.Refer(&g, inv); err != nil {
		return err
	}

	pong, err := g.Echo.Echo(ctx, "ping")
	if errors.Is(err, status.ErrDial) {
		return fmt.Errorf("echo: %w\n(is the provider running? go run ./examples/direct/provider -addr %s starts it)", err, addr)
	}
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	fmt.Println("echo:", pong)

	hello, err := g.SayHello(service.WithAttachment(ctx, "from", "consumer"), name)
	if err != nil {
		return fmt.Errorf("SayHello: %w", err)
	}
	fmt.Println("SayHello:", hello)

	q, err := g.Divide(ctx, 7, 2)
	if err != nil {
		return fmt.Errorf("divide: %w", err)
	}
	fmt.Println("Divide(7, 2):", q)

	_, err = g.Divide(ctx, 1, 0)
	var be *service.Error
	if !errors.As(err, &be) {
		return fmt.Errorf("Divide(1, 0): want a business error, got %v", err)
	}
	fmt.Printf("Divide(1, 0): business error, code %d, remote %t: %s\n", be.Code, be.Remote, be.Message)
	return nil
}
