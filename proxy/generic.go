package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// Generic calls any method of a service by name, without its Go types; it
// is for tools (a CLI, a gateway, tests). It implements service.Generic and
// is safe for concurrent use.
type Generic struct {
	inv                     protocol.Invoker
	service, version, group string
}

var _ service.Generic = (*Generic)(nil)

// NewGeneric returns a Generic that calls through inv, for the service,
// version and group of inv.URL().
func NewGeneric(inv protocol.Invoker) (*Generic, error) {
	if inv == nil {
		return nil, errors.New("proxy: generic: nil invoker")
	}
	u := inv.URL()
	if u == nil {
		return nil, errors.New("proxy: generic: invoker has no URL")
	}
	return &Generic{inv: inv, service: u.Interface(), version: u.Version(), group: u.Group()}, nil
}

// Invoke calls method with args and returns the reply as decoded without a
// declared type (for msgpack and json: maps, slices, strings, numbers,
// booleans, nil). The provider decodes args into the method's parameter
// types, so a struct parameter may be passed as a map of its fields.
// Attachments are taken from ctx; errors are the invoker's, unchanged.
// service.EchoMethod is a valid method when inv reaches a protocol (the
// protocol answers it, not the provider).
func (g *Generic) Invoke(ctx context.Context, method string, args []any) (any, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if method == "" {
		return nil, fmt.Errorf("proxy: generic call to %s: empty method name", g.service)
	}
	inv := &protocol.Invocation{
		Service: g.service, Version: g.version, Group: g.group,
		Method: method, Args: args, Attachments: service.AttachmentsFrom(ctx),
	}
	res, err := g.inv.Invoke(ctx, inv)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, nil
	}
	return res.Value, nil
}
