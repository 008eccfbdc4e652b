package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/transport"
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
// the application knows (WithSerializer adds to it). The limits a dubbo
// entry of Config.Protocols sets (max_memory, max_memory_per_ip,
// max_reply_memory, frame_timeout, max_payload) win over the same fields
// of o; those it leaves unset keep o's.
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

// dubboLimit is one limit of the dubbo protocol that a protocols entry
// may set (ProtocolConfig.MaxMemory and the keys after it).
type dubboLimit struct {
	key      string // the YAML key
	get      func(ProtocolConfig) int64
	set      func(*dubbo.Options, int64)
	zero     string // what 0 stands for
	duration bool
}

var dubboLimitKeys = []dubboLimit{
	{"max_memory", func(p ProtocolConfig) int64 { return int64(p.MaxMemory) },
		func(o *dubbo.Options, v int64) { o.MaxMemory = int(v) }, "the default, " + sizeText(transport.DefaultMaxMemory) + " or twice max_payload", false},
	{"max_memory_per_ip", func(p ProtocolConfig) int64 { return int64(p.MaxMemoryPerIP) },
		func(o *dubbo.Options, v int64) { o.MaxMemoryPerIP = int(v) }, "the default, an eighth of max_memory", false},
	{"max_reply_memory", func(p ProtocolConfig) int64 { return int64(p.MaxReplyMemory) },
		func(o *dubbo.Options, v int64) { o.MaxReplyMemory = int(v) }, "the default, " + sizeText(transport.DefaultMaxMemory) + " or twice max_payload", false},
	{"frame_timeout", func(p ProtocolConfig) int64 { return int64(p.FrameTimeout) },
		func(o *dubbo.Options, v int64) { o.FrameTimeout = time.Duration(v) }, "the default, " + transport.DefaultFrameTimeout.String(), true},
	{"max_payload", func(p ProtocolConfig) int64 { return int64(p.MaxPayload) },
		func(o *dubbo.Options, v int64) { o.MaxPayload = int(v) }, "the default, " + sizeText(dubbo.DefaultMaxPayload), false},
}

// sizeText writes n bytes as advice reads them: "256 MiB", "64 KiB", or
// "1000 bytes" when not a whole number of either.
func sizeText(n int) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (l dubboLimit) show(v int64) string {
	if l.duration {
		return time.Duration(v).String()
	}
	return fmt.Sprint(v)
}

// dubboLimits returns base with the limits the dubbo entries of
// c.Protocols set (validated: they agree) in place of its own.
func (c *Config) dubboLimits(base dubbo.Options) dubbo.Options {
	for _, id := range sortedKeys(c.Protocols) {
		p := c.Protocols[id]
		if p.Name != dubbo.Name {
			continue
		}
		for _, l := range dubboLimitKeys {
			if v := l.get(p); v > 0 {
				l.set(&base, v)
			}
		}
	}
	return base
}

// checkDubboLimits checks the dubbo limits of c.Protocols: on dubbo
// entries only, not negative, the same value wherever set, and, on top
// of the options given in Go (nil: none), valid as dubbo.Options.Validate
// judges them. Each error is a *KeyError naming the key.
func (c *Config) checkDubboLimits(given *dubboSettings) []error {
	var errs []error
	add := func(key, advice, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Advice: advice, Err: fmt.Errorf("config: "+key+" "+format, args...)})
	}
	setBy := map[string]string{} // limit key → the first entry (by id) that sets it
	for _, id := range sortedKeys(c.Protocols) {
		p := c.Protocols[id]
		for _, l := range dubboLimitKeys {
			v := l.get(p)
			if v == 0 {
				continue
			}
			key := "protocols." + id + "." + l.key
			switch first, seen := setBy[l.key]; {
			case p.Name != dubbo.Name:
				add(key, "remove it; give the protocol's own limits in Go, with its factory (WithProtocol)",
					"%s: a limit of the dubbo protocol, and this entry's protocol is %s", l.show(v), p.Name)
			case v < 0:
				unit := "number of bytes"
				if l.duration {
					unit = "duration, such as 5s"
				}
				add(key, fmt.Sprintf("write a positive %s, or 0 or nothing for %s", unit, l.zero),
					"%s: must not be negative", l.show(v))
			case !seen:
				setBy[l.key] = id
			case l.get(c.Protocols[first]) != v:
				add(key, "the application makes one dubbo protocol for every dubbo entry, and its limits hold for all their ports: give the same value in both entries, or set it in one only",
					"%s differs from protocols.%s.%s %s", l.show(v), first, l.key, l.show(l.get(c.Protocols[first])))
			}
		}
	}
	if len(errs) > 0 || len(setBy) == 0 {
		return errs
	}
	var base dubbo.Options
	if given != nil {
		base = given.opts
	}
	if base.Validate() != nil {
		return nil // WithProtocolOptions' own mistake: making the protocol says it
	}
	m := c.dubboLimits(base)
	at := func(keys ...string) string {
		for _, k := range keys {
			if id, ok := setBy[k]; ok {
				return "protocols." + id + "." + k
			}
		}
		return ""
	}
	payload := m.MaxPayload
	if payload == 0 {
		payload = dubbo.DefaultMaxPayload
	}
	fits := func(memKey string, mem int, o dubbo.Options) {
		key := at(memKey, "max_payload")
		if key == "" || o.Validate() == nil {
			return
		}
		advice := fmt.Sprintf("raise %s to at least %d, or lower max_payload", memKey, payload+transport.HeaderSize)
		if key == at(memKey) {
			add(key, advice, "%d is less than one frame of max_payload %d and its %d-byte header: such a frame could never be read",
				mem, payload, transport.HeaderSize)
		} else {
			add(key, advice, "%d: one frame of it and its %d-byte header is more than %s %d: such a frame could never be read",
				payload, transport.HeaderSize, memKey, mem)
		}
	}
	fits("max_memory", m.MaxMemory, dubbo.Options{MaxMemory: m.MaxMemory, MaxPayload: m.MaxPayload})
	fits("max_reply_memory", m.MaxReplyMemory, dubbo.Options{MaxReplyMemory: m.MaxReplyMemory, MaxPayload: m.MaxPayload})
	if err := m.Validate(); err != nil && len(errs) == 0 {
		// A rule of dubbo.Options.Validate the checks above do not know.
		key := "protocols." + setBy[sortedKeys(setBy)[0]]
		add(key, "", "with WithProtocolOptions: %w", err)
	}
	return errs
}
