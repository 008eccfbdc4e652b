// Package greeter is the service of the hello example: the contract both
// sides share and the provider's implementation.
package greeter

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
)

// Interface is the service's name in the registry.
const Interface = "demo.hello.Greeter"

// Reply says who answered.
type Reply struct {
	Message string `msgpack:"message"`
	// Name is the provider's -name; Addr the host:port it serves on.
	Name string `msgpack:"name"`
	Addr string `msgpack:"addr"`
}

// Client is the consumer stub.
type Client struct {
	SayHello func(ctx context.Context, name string) (*Reply, error)
}

// Service is the provider: it answers after Delay, with its Name and the
// address set by SetAddr.
type Service struct {
	Name  string
	Delay time.Duration
	addr  atomic.Pointer[string]
}

// SetAddr records the address the service is exported at.
func (s *Service) SetAddr(a string) { s.addr.Store(&a) }

// SayHello greets name.
func (s *Service) SayHello(ctx context.Context, name string) (*Reply, error) {
	if s.Delay > 0 {
		t := time.NewTimer(s.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r := &Reply{Message: "hello, " + name, Name: s.Name}
	if a := s.addr.Load(); a != nil {
		r.Addr = *a
	}
	return r, nil
}

// RegistryHint adds what to do to err when it says the registry at
// address did not answer (config.ErrRegistryUnreachable), or that it
// lists no provider (cluster.ErrNoProvider); other errors are returned as
// they are.
func RegistryHint(err error, address string) error {
	switch {
	case errors.Is(err, config.ErrRegistryUnreachable):
		return fmt.Errorf("%w\n(is ZooKeeper running at %s? In the minidubbo directory, make zk-start starts one on 127.0.0.1:2181)", err, address)
	case errors.Is(err, cluster.ErrNoProvider):
		return fmt.Errorf("%w\n(start a provider first: go run ./examples/hello/provider -registry %s)", err, address)
	}
	return err
}
