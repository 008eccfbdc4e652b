package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// ServerTLSConfig makes a protocol's port speak TLS (protocols.<id>.tls in
// YAML). Files are PEM, read once by New; a relative path is relative to
// the working directory. The port publishes tls=true in its URLs (and
// mtls=true with ClientCAFile), so that consumers without TLS are told
// why they cannot call it. TLS 1.2 is the oldest version spoken.
//
// The Go equivalent with a *tls.Config of your own is
// dubbo.Options.ServerTLS (WithProtocolOptions), for every port that has
// no tls key, or dubbo.Protocol.ExportTLS.
type ServerTLSConfig struct {
	// CertFile is the provider's certificate chain, leaf first (required).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the private key of the certificate (required).
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, turns on mutual TLS: consumers must present a
	// certificate signed by one of the CAs in this file, or the handshake
	// fails.
	ClientCAFile string `yaml:"client_ca_file"`
}

// ClientTLSConfig makes a reference's connections speak TLS
// (references.<id>.tls in YAML, or consumer.tls for every reference that
// has none). Files are PEM, read once by New; a relative path is relative
// to the working directory. A reference with TLS refuses to call a
// provider that does not publish tls=true rather than fall back to plain
// TCP (providers in a reference's url key are taken to speak TLS). TLS 1.2
// is the oldest version spoken.
//
// The Go equivalent with a *tls.Config of your own is
// dubbo.Options.ClientTLS (WithProtocolOptions), for every reference that
// has no tls key, or dubbo.Protocol.ReferTLS.
type ClientTLSConfig struct {
	// CAFile holds the CAs trusted to sign providers' certificates
	// (default: the system's).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are this consumer's certificate and key, for
	// providers that require one (mutual TLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the provider's certificate must be valid for
	// (default: the host of its address, so a provider registered by IP
	// address needs that IP in its certificate's subject alternative
	// names, or this set).
	ServerName string `yaml:"server_name"`
}

// ConsumerConfig holds what applies to every reference that does not set
// it itself.
type ConsumerConfig struct {
	// TLS, when set, makes the connections of every reference without a
	// tls key of its own speak TLS, and those to the monitor service.
	TLS *ClientTLSConfig `yaml:"tls"`
}

// WithServerTLS makes the port of the protocol id speak TLS with cfg: the
// Go form of protocols.<id>.tls, for certificates that are not files (or
// are rotated through cfg.GetCertificate). Mutual TLS is
// cfg.ClientAuth = tls.RequireAndVerifyClientCert with cfg.ClientCAs.
// Giving a protocol both is an error, as is an unknown id.
func WithServerTLS(id string, cfg *tls.Config) Option {
	return func(a *Application) error {
		if cfg == nil {
			return fmt.Errorf("config: WithServerTLS %q: nil *tls.Config", id)
		}
		a.goTLS.server[id] = cfg
		return nil
	}
}

// WithClientTLS makes the connections of the reference id speak TLS with
// cfg: the Go form of references.<id>.tls, or, with id "", of
// consumer.tls. Giving a reference both is an error, as is an unknown id.
func WithClientTLS(id string, cfg *tls.Config) Option {
	return func(a *Application) error {
		if cfg == nil {
			return fmt.Errorf("config: WithClientTLS %q: nil *tls.Config", id)
		}
		key := "consumer"
		if id != "" {
			key = "references." + id
		}
		a.goTLS.client[key] = cfg
		return nil
	}
}

// ErrPlaintextProvider is wrapped by the error of a call through a
// reference with TLS to a provider whose URL does not say tls=true.
var ErrPlaintextProvider = errors.New("the provider does not speak TLS (no tls=true on its URL)")

// validateTLS checks the shape of every tls key (which files go
// together); New reads the files.
func (c *Config) validateTLS(bad func(format string, args ...any)) {
	for _, id := range sortedKeys(c.Protocols) {
		if t := c.Protocols[id].TLS; t != nil && (t.CertFile == "" || t.KeyFile == "") {
			bad("protocols.%s.tls: cert_file and key_file are both required", id)
		}
	}
	client := func(key string, t *ClientTLSConfig) {
		if t != nil && (t.CertFile == "") != (t.KeyFile == "") {
			bad("%s: cert_file and key_file go together", key)
		}
	}
	client("consumer.tls", c.Consumer.TLS)
	for _, id := range sortedKeys(c.References) {
		client("references."+id+".tls", c.References[id].TLS)
	}
}

// tlsConfigs are the TLS configurations New builds from Config.
type tlsConfigs struct {
	server map[string]*tls.Config // by protocol id
	client map[string]*tls.Config // by "references.<id>", and "consumer" for the default
}

func newTLSConfigs() tlsConfigs {
	return tlsConfigs{server: map[string]*tls.Config{}, client: map[string]*tls.Config{}}
}

// loadTLS reads the files of every tls key of c, and adds the
// configurations given in Go.
func loadTLS(c *Config, given tlsConfigs) (tlsConfigs, error) {
	out := newTLSConfigs()
	var errs []error
	for _, id := range sortedKeys(given.server) {
		switch p, ok := c.Protocols[id]; {
		case !ok:
			errs = append(errs, fmt.Errorf("config: WithServerTLS: unknown protocol %q (known: %s)", id, strings.Join(sortedKeys(c.Protocols), ", ")))
		case p.TLS != nil:
			errs = append(errs, fmt.Errorf("config: WithServerTLS %q: protocols.%s.tls is set too; give one", id, id))
		}
		out.server[id] = given.server[id]
	}
	for _, key := range sortedKeys(given.client) {
		var set bool
		if id, ok := strings.CutPrefix(key, "references."); ok {
			r, ok := c.References[id]
			if !ok {
				errs = append(errs, fmt.Errorf("config: WithClientTLS: unknown reference %q (known: %s)", id, strings.Join(sortedKeys(c.References), ", ")))
			}
			set = r.TLS != nil
		} else {
			set = c.Consumer.TLS != nil
		}
		if set {
			errs = append(errs, fmt.Errorf("config: WithClientTLS: %s.tls is set too; give one", key))
		}
		out.client[key] = given.client[key]
	}
	for _, id := range sortedKeys(c.Protocols) {
		if t := c.Protocols[id].TLS; t != nil && out.server[id] == nil {
			cfg, err := t.load("protocols." + id + ".tls")
			errs = append(errs, err)
			out.server[id] = cfg
		}
	}
	if t := c.Consumer.TLS; t != nil && out.client["consumer"] == nil {
		cfg, err := t.load("consumer.tls")
		errs = append(errs, err)
		out.client["consumer"] = cfg
	}
	for _, id := range sortedKeys(c.References) {
		key := "references." + id
		if t := c.References[id].TLS; t != nil && out.client[key] == nil {
			cfg, err := t.load(key + ".tls")
			errs = append(errs, err)
			out.client[key] = cfg
		}
	}
	return out, errors.Join(errs...)
}

// forReference returns the TLS configuration of the reference named key
// ("references.<id>", or "monitor"): its own, else consumer.tls, else nil.
func (t tlsConfigs) forReference(key string) *tls.Config {
	if cfg, ok := t.client[key]; ok {
		return cfg
	}
	return t.client["consumer"]
}

func (t *ServerTLSConfig) load(key string) (*tls.Config, error) {
	cert, err := loadPair(key, t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pool, err := loadPool(key+".client_ca_file", t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func (t *ClientTLSConfig) load(key string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pool, err := loadPool(key+".ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := loadPair(key, t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// loadPair reads a certificate chain and its key; the errors name the
// key of the file at fault.
func loadPair(key, certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s.cert_file: %w", key, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s.key_file: %w", key, err)
	}
	if _, err := parseCerts(certPEM); err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s.cert_file %q: %w", key, certFile, err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !isKeyBlock(b.Type) {
		return tls.Certificate{}, fmt.Errorf("config: %s.key_file %q: no PEM private key in it", key, keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s: key_file %q does not go with cert_file %q: %w", key, keyFile, certFile, err)
	}
	if leaf := cert.Leaf; leaf != nil {
		if now := time.Now(); now.After(leaf.NotAfter) {
			return tls.Certificate{}, fmt.Errorf("config: %s.cert_file %q: the certificate expired at %s", key, certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
		} else if now.Before(leaf.NotBefore) {
			return tls.Certificate{}, fmt.Errorf("config: %s.cert_file %q: the certificate is not valid before %s", key, certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return cert, nil
}

func isKeyBlock(typ string) bool {
	switch typ {
	case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
		return true
	}
	return false
}

// loadPool reads the CA certificates of file; key names it in errors.
func loadPool(key, file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", key, err)
	}
	certs, err := parseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("config: %s %q: %w", key, file, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCerts returns the certificates of the PEM data: at least one, and
// nothing that is not one.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM %q block where certificates go", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return certs, nil
}

// referTLS refers u over p with the reference's TLS configuration cfg
// (nil: the protocol's own). A provider this reference cannot talk to
// because of TLS (it requires TLS or a client certificate this reference
// lacks, or it does not speak TLS and this reference does) gets an
// invoker whose calls fail saying so and what to set, rather than being
// skipped in silence; direct says the URL came from the reference's url
// key, which is taken to speak TLS when the reference does, and whose
// errors are returned at once.
func referTLS(p protocol.Protocol, u *protocol.URL, cfg *tls.Config, anyTLS bool, key string, direct bool, log *zap.Logger) (protocol.Invoker, error) {
	if direct && anyTLS && u.Param(keyTLS, "") == "" {
		u = u.With(keyTLS, "true")
	}
	var refused error
	inv, err := func() (protocol.Invoker, error) {
		if anyTLS && u.Param(keyTLS, "") != "true" {
			return nil, ErrPlaintextProvider
		}
		if tr, ok := p.(tlsReferrer); ok && cfg != nil {
			return tr.ReferTLS(u, cfg)
		}
		return p.Refer(u)
	}()
	switch {
	case errors.Is(err, ErrPlaintextProvider):
		refused = fmt.Errorf("config: %s: provider %s: %w, and this reference speaks only TLS (%s.tls, consumer.tls or WithClientTLS); it is not called in plain TCP",
			key, u.Address(), err, key)
	case tlsRefusal(err, key, u.Address()) != nil:
		refused = tlsRefusal(err, key, u.Address())
	default:
		return inv, err
	}
	if direct {
		return nil, refused
	}
	log.Warn("provider refused for its TLS; calls to it fail", zap.String("reference", key), zap.String("provider", u.Address()), zap.Error(refused))
	return refusedInvoker{url: u, err: &notSentError{err: refused}}, nil
}

// notSentError is refused's error, which also matches status.ErrDial (the
// call was not sent; failover tries another provider) without saying
// "dial failed".
type notSentError struct{ err error }

func (e *notSentError) Error() string   { return e.err.Error() }
func (e *notSentError) Unwrap() []error { return []error{e.err, status.ErrDial} }

// refusedInvoker stands for a provider that cannot be called, so that
// calls tell why rather than find no provider.
type refusedInvoker struct {
	url *protocol.URL
	err error
}

func (r refusedInvoker) URL() *protocol.URL { return r.url }

func (r refusedInvoker) Invoke(context.Context, *protocol.Invocation) (*protocol.Result, error) {
	return nil, r.err
}

// refusedReason returns, when every one of invs stands for a provider
// refused for its TLS, the first refusal (for ReferenceConfig.Check to
// report at Refer rather than at the first call); otherwise nil.
func refusedReason(invs []protocol.Invoker) error {
	var first error
	for _, inv := range invs {
		r, ok := unwrapRefused(inv)
		if !ok {
			return nil
		}
		if first == nil {
			first = r.err
		}
	}
	return first
}

// unwrapRefused finds a refusedInvoker behind wrappers with an Unwrap
// method (filter chains, the directory's tracking).
func unwrapRefused(inv protocol.Invoker) (refusedInvoker, bool) {
	for range 64 {
		if r, ok := inv.(refusedInvoker); ok {
			return r, true
		}
		u, ok := inv.(interface{ Unwrap() protocol.Invoker })
		if !ok {
			break
		}
		inv = u.Unwrap()
	}
	return refusedInvoker{}, false
}
