package config

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/serialize"
)

// This file is the only one of config that knows the dubbo protocol: it
// registers it as the built-in protocol and translates its settings.

// DefaultProtocol is the protocol of a protocols entry without a name, and
// of a reference url without a scheme.
const DefaultProtocol = dubbo.Name

// keyTLS is the URL parameter by which a provider says its port speaks
// TLS (the dubbo protocol's; a protocol of another name without TLS
// leaves it out).
const keyTLS = dubbo.KeyTLS

// dubboSettings are the dubbo protocol's settings given in Go.
type dubboSettings struct{ opts dubbo.Options }

// WithProtocolOptions sets the options of the dubbo protocol (payload
// limit, heartbeat, dispatch limit, TLS, ...). Its Serializers table, when
// set, replaces msgpack and json as the serializations every protocol of
// the application knows (WithSerializer adds to it).
func WithProtocolOptions(o dubbo.Options) Option {
	return func(a *Application) error {
		a.dubbo = dubboSettings{opts: o}
		return nil
	}
}

// builtinProtocols are the protocol table's built-in entries: dubbo, made
// with the options of WithProtocolOptions.
func (a *Application) builtinProtocols() map[string]protocol.Factory {
	return map[string]protocol.Factory{dubbo.Name: a.newDubbo}
}

// newDubbo makes the dubbo protocol.
func (a *Application) newDubbo(s protocol.Settings) (protocol.Protocol, error) {
	o := a.dubbo.opts
	o.Serializers = s.Serializers
	if o.Logger == nil {
		o.Logger = s.Logger
	}
	p, err := dubbo.New(&o)
	if err != nil {
		return nil, err
	}
	return dubboProtocol{p}, nil
}

// dubboProtocol gives *dubbo.Protocol's ExportTLS the signature of the
// tlsExporter capability.
type dubboProtocol struct{ *dubbo.Protocol }

func (p dubboProtocol) ExportTLS(inv protocol.Invoker, cfg *tls.Config) (protocol.Exporter, error) {
	e, err := p.Protocol.ExportTLS(inv, cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// givenSerializers is the serialization table of WithProtocolOptions, or
// nil.
func (a *Application) givenSerializers() *serialize.Table { return a.dubbo.opts.Serializers }

// defaultClientTLS reports whether WithProtocolOptions gave every
// reference a TLS configuration.
func (a *Application) defaultClientTLS() bool { return a.dubbo.opts.ClientTLS != nil }

// tlsRefusal explains err when it is the dubbo protocol refusing to refer
// a provider for want of TLS settings (nil otherwise); key names the
// reference's settings.
func tlsRefusal(err error, key, addr string) error {
	switch {
	case errors.Is(err, dubbo.ErrTLSRequired):
		return fmt.Errorf("config: %s: provider %s: %w, and this reference has no TLS configuration: set %s.tls or consumer.tls (ca_file; cert_file and key_file when the provider wants client certificates), or WithClientTLS in Go",
			key, addr, dubbo.ErrTLSRequired, key)
	case errors.Is(err, dubbo.ErrClientCertRequired):
		return fmt.Errorf("config: %s: provider %s: %w, and this reference's TLS configuration has none: set cert_file and key_file in %s.tls or consumer.tls (Certificates with WithClientTLS in Go)",
			key, addr, dubbo.ErrClientCertRequired, key)
	}
	return nil
}
