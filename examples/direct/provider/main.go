// Command provider serves demo.Greeter over the dubbo protocol at an
// address, with no registry:
//
//	go run ./examples/direct/provider -addr 127.0.0.1:20880
//
// It prints the service, its version and the address it serves on (useful
// with port 0) and runs until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/minidubbo/minidubbo/examples/direct/greeter"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:20880", "`host:port` to serve on (port 0 picks a free port)")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	u, err := greeter.URL(addr)
	if err != nil {
		return err
	}
	p, err := dubbo.New(nil)
	if err != nil {
		return err
	}
	defer p.Close()

	inv, err := proxy.NewProvider(u, greeter.Service{})
	if err != nil {
		return err
	}
	exp, err := p.Export(inv)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w\n(another process serves on %s, perhaps a provider started before: "+
			"stop it, or give -addr another port, -addr 127.0.0.1:0 for any free one)", err, addr)
	}
	if err != nil {
		return err
	}
	served := exp.URL().Address()
	// The version with the name: a caller must ask for both (minidubbo
	// invoke -url ADDR -service demo.Greeter -version 1.0.0 ...).
	fmt.Printf("provider: serving %s version %s on %s\n", greeter.Interface, greeter.Version, served)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		return err
	}
	fmt.Println("provider: stopped")
	return nil
}
