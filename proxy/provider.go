package proxy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

var anyType = reflect.TypeFor[any]()

// ProviderOption configures NewProvider.
type ProviderOption func(*providerConfig)

type providerConfig struct {
	strict bool
}

// Strict makes NewProvider fail when any exported method of the service
// does not fit the service rules, instead of leaving it out.
func Strict() ProviderOption { return func(c *providerConfig) { c.strict = true } }

// Provider is a provider invoker: it dispatches invocations to the methods
// of a service value. It implements protocol.Invoker and protocol.ArgTyper,
// and is safe for concurrent use.
//
// For each call it looks the method up (one map lookup), puts the
// invocation's attachments, without the framework's own (token and the
// like), into the context as the incoming ones (service.Attachment and
// service.Incoming read them; they are not sent on by the method's own
// calls unless it uses service.Propagate), and calls the method. Its errors are:
//
//   - an unknown method: an error wrapping status.ErrServiceNotFound that
//     names the method and lists the known ones;
//   - arguments of the wrong count or types: an error wrapping
//     status.ErrBadRequest that names the method and its parameter types;
//   - the error the method returned, unchanged (the protocol sends it to
//     the caller as a business error, see service.FromError).
//
// A panic in the method is not recovered here: it goes on to the protocol
// that called Invoke, which recovers it once (protocol/dubbo answers a
// *service.Error with service.CodePanic and an incident id, logs the stack
// under that id, and keeps serving). Nor is service.EchoMethod answered
// here: the protocol answers it before the arguments reach a provider.
type Provider struct {
	url   *protocol.URL
	rcvr  reflect.Value
	table *service.Table
	iface string
}

var (
	_ protocol.Invoker  = (*Provider)(nil)
	_ protocol.ArgTyper = (*Provider)(nil)
)

// NewProvider returns a provider invoker serving the exported methods of
// impl, usually a pointer to a struct, that have the form
//
//	func (s *S) M(ctx context.Context, args...) (T, error)
//	func (s *S) M(ctx context.Context, args...) error
//
// The URL says where and as what the service is exported (its interface,
// version and group). It is an error when no method of impl fits, or, with
// Strict, when any exported method does not; the error names the methods
// and the rule each breaks.
func NewProvider(u *protocol.URL, impl any, opts ...ProviderOption) (*Provider, error) {
	var c providerConfig
	for _, o := range opts {
		o(&c)
	}
	if u == nil {
		return nil, errors.New("proxy: provider needs a URL")
	}
	table, err := service.TableFor(impl)
	if err != nil {
		return nil, fmt.Errorf("proxy: provider %s: %w", u.Interface(), err)
	}
	if c.strict {
		if err := table.Strict(); err != nil {
			return nil, fmt.Errorf("proxy: provider %s: %w", u.Interface(), err)
		}
	}
	rcvr := reflect.ValueOf(impl)
	if rcvr.Kind() != reflect.Pointer {
		// An addressable copy, so that service.Method.CallDirect can
		// call the methods through its address.
		c := reflect.New(rcvr.Type()).Elem()
		c.Set(rcvr)
		rcvr = c
	}
	return &Provider{url: u, rcvr: rcvr, table: table, iface: u.Interface()}, nil
}

// URL returns the URL the provider was built with.
func (p *Provider) URL() *protocol.URL { return p.url }

// Methods returns the names of the served methods, sorted, for the URL's
// methods parameter.
func (p *Provider) Methods() []string { return p.table.Names() }

// ArgTypes returns the parameter types of method, after the context, so the
// protocol can decode arguments straight into them. The returned slice
// must not be modified.
func (p *Provider) ArgTypes(method string) ([]reflect.Type, bool) {
	if m, ok := p.table.Method(method); ok {
		return m.ArgTypes, true
	}
	return nil, false
}

// Invoke calls the method inv.Method with inv.Args; see Provider for the
// errors. The Result's Value is the method's reply (nil for an error-only
// method).
func (p *Provider) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	m, ok := p.table.Method(inv.Method)
	if !ok {
		return nil, fmt.Errorf("%w: proxy: %s has no method %q (known: %s)",
			status.ErrServiceNotFound, p.iface, inv.Method, strings.Join(p.table.Names(), ", "))
	}
	if in := userAttachments(inv.Attachments); len(in) > 0 {
		ctx = service.NewIncomingContext(ctx, in)
	}
	r := new(result)
	v, called, err := m.CallDirect(ctx, p.rcvr, inv.Args, &r.reply)
	if !called {
		args, aerr := m.Args(inv.Args)
		if aerr != nil {
			return nil, fmt.Errorf("%w: proxy: %s.%w", status.ErrBadRequest, p.iface, trimPrefix(aerr))
		}
		v, err = m.Call(ctx, p.rcvr, args)
	}
	if err != nil {
		return nil, err
	}
	r.res.Value = v
	return &r.res, nil
}

// result is a call's Result and its reply, in one allocation.
type result struct {
	res   protocol.Result
	reply service.Reply
}

// trimPrefix drops the "service: " prefix of a service error so the proxy
// message reads "proxy: demo.Greeter.SayHello(...)".
func trimPrefix(err error) error {
	return prefixTrimmed{err}
}

type prefixTrimmed struct{ err error }

func (e prefixTrimmed) Error() string { return strings.TrimPrefix(e.err.Error(), "service: ") }
func (e prefixTrimmed) Unwrap() error { return e.err }

// frameworkKeys are the keys protocol.IsFrameworkKey reports.
var frameworkKeys = [...]string{protocol.KeyToken, protocol.KeyRemoteApplication}

// userAttachments returns atts without the framework's keys (token and
// the like), copying only when there is one to remove, and nil when there
// are only framework keys.
func userAttachments(atts map[string]string) service.Attachments {
	if len(atts) == 0 {
		return nil
	}
	// Looked up, not ranged over: iterating a map costs more than a few
	// lookups.
	framework := 0
	for _, k := range frameworkKeys {
		if _, ok := atts[k]; ok {
			framework++
		}
	}
	switch framework {
	case 0:
		return atts
	case len(atts):
		return nil
	}
	out := make(service.Attachments, len(atts)-framework)
	for k, v := range atts {
		if !protocol.IsFrameworkKey(k) {
			out[k] = v
		}
	}
	return out
}
