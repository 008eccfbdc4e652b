package exchange

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/transport"
)

// Defaults of Options.
const (
	DefaultMaxPayload    = transport.DefaultMaxPayload
	DefaultHeartbeat     = 30 * time.Second
	DefaultMaxConcurrent = 200
)

// Options configure a Client or a Server. A nil *Options, and every zero
// field, means the default.
type Options struct {
	// MaxPayload bounds frame bodies both ways (default 8 MiB). A request
	// over it fails with ErrPayloadTooLarge before it is sent; a response
	// over it is replaced by a StatusPayloadTooLarge answer.
	MaxPayload int
	// Heartbeat is how long a connection may be idle before a heartbeat is
	// sent (default 30 s). A client that has read nothing for 2.5
	// heartbeats takes its peer as dead; a server closes connections idle
	// for 3.
	Heartbeat time.Duration
	// MaxConcurrent bounds the requests a Server runs at once (default
	// 200); requests over it are answered StatusServerBusy at once.
	MaxConcurrent int
	// TLS, when set, makes the connection speak TLS.
	TLS *tls.Config
	// Logger (default zap.NewNop()).
	Logger *zap.Logger
}

// Validate returns an error naming the first invalid field.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.MaxPayload < 0:
		return fmt.Errorf("exchange: MaxPayload %d is negative", o.MaxPayload)
	case o.Heartbeat < 0:
		return fmt.Errorf("exchange: Heartbeat %v is negative", o.Heartbeat)
	case o.MaxConcurrent < 0:
		return fmt.Errorf("exchange: MaxConcurrent %d is negative", o.MaxConcurrent)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (o *Options) transport() *transport.Options {
	return &transport.Options{MaxPayload: o.MaxPayload, TLS: o.TLS, Logger: o.Logger}
}
