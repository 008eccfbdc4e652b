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

// RegistryHint puts what to do, in the example's own terms (its
// -registry flag, make zk-start), before err when err says the registry at
// address did not answer (config.ErrRegistryUnreachable) or that it lists
// no provider (cluster.ErrNoProvider). config's error follows on the next
// line without its own advice, which speaks of YAML keys the example's
// user never wrote (config.WithoutAdvice). Other errors are returned as
// they are. The result wraps err.
func RegistryHint(err error, address string) error {
	switch {
	case errors.Is(err, config.ErrRegistryUnreachable):
		return fmt.Errorf("the registry at %s did not answer: is ZooKeeper running there? "+
			"(in the minidubbo directory, make zk-start starts one on 127.0.0.1:2181; "+
			"for one elsewhere, give -registry zookeeper://HOST:PORT)\n%w", address, config.WithoutAdvice(err))
	case errors.Is(err, cluster.ErrNoProvider):
		return fmt.Errorf("no provider of %s in the registry at %s: start one first "+
			"(go run ./examples/hello/provider -registry %s)\n%w", Interface, address, address, config.WithoutAdvice(err))
	}
	return err
}

// FlagHint names the flag behind a configuration error, for a program
// that fills config.Config from its flags: config's errors name YAML keys
// (references.greeter.loadbalance) that the program's user never wrote.
// When the first config.KeyError in err is about one of keys (a key's
// path, mapped to its flag), the flag comes first and config's advice,
// in YAML terms, is left out: "-loadbalance: config:
// references.greeter.loadbalance: unknown ...". advice, when not empty,
// is the program's own, put on the next line in parentheses. Other
// errors are returned as they are. The result wraps err.
func FlagHint(err error, keys map[string]string, advice string) error {
	var ke *config.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	flag, ok := keys[ke.Key]
	if !ok {
		return err
	}
	if advice != "" {
		return fmt.Errorf("%s: %w\n(%s)", flag, config.WithoutAdvice(err), advice)
	}
	return fmt.Errorf("%s: %w", flag, config.WithoutAdvice(err))
}
