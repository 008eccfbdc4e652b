// Package greeter is the service of the direct-connect example: the
// contract both sides share (the interface name and the consumer stub) and
// the provider's implementation.
package greeter

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/service"
)

// Interface is the service's name in URLs; Version tells its versions apart.
const (
	Interface = "demo.Greeter"
	Version   = "1.0.0"
)

// Client is the consumer stub: proxy.Refer fills its func fields, each of
// which calls the provider method of the same name.
type Client struct {
	service.Echo
	SayHello func(ctx context.Context, name string) (string, error)
	Divide   func(ctx context.Context, a, b int64) (int64, error)
}

// Service is the provider's implementation.
type Service struct{}

// SayHello greets name, and says who asked when the caller attached "from".
func (Service) SayHello(ctx context.Context, name string) (string, error) {
	if from, ok := service.Attachment(ctx, "from"); ok {
		return "hello, " + name + " (asked by " + from + ")", nil
	}
	return "hello, " + name, nil
}

// Divide returns a/b, or a business error with CodeInvalidArgument when b
// is 0; the consumer gets it back as a *service.Error.
func (Service) Divide(_ context.Context, a, b int64) (int64, error) {
	if b == 0 {
		return 0, service.Errorf(service.CodeInvalidArgument, "cannot divide %d by zero", a)
	}
	return a / b, nil
}

// URL returns the dubbo URL of the service at addr (host:port), or an
// error naming what is wrong with addr.
func URL(addr string) (*protocol.URL, error) {
	const write = "write host:port, such as -addr 127.0.0.1:20880"
	if _, err := strconv.Atoi(addr); err == nil {
		return nil, fmt.Errorf("bad -addr %q: a port alone; write host:port, such as -addr 127.0.0.1:%s", addr, addr)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bad -addr %q: %w; %s", addr, err, write)
	}
	port, err := strconv.Atoi(portStr)
	switch {
	case err != nil:
		return nil, fmt.Errorf("bad -addr %q: port %q is not a number; %s", addr, portStr, write)
	case port < 0 || port > 65535:
		return nil, fmt.Errorf("bad -addr %q: port %d is out of range (0-65535, 0 for a free one when serving)", addr, port)
	}
	return protocol.NewURL(dubbo.Name, host, port, Interface, map[string]string{protocol.KeyVersion: Version}), nil
}
