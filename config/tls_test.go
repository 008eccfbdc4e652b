package config_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/status"
)

// pki is a set of PEM files made for one test: a CA, a provider
// certificate for 127.0.0.1 and greeter.internal, a consumer certificate,
// and a stranger CA with its own consumer certificate.
type pki struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	otherCA, strangerCert     string
	strangerKey, otherSrvCert string
	otherSrvKey               string
}

func newPKI(t *testing.T) pki {
	dir := t.TempDir()
	ca, other := testcert.NewCA(t, "ca"), testcert.NewCA(t, "other")
	p := pki{dir: dir, ca: ca.WriteCA(t, dir), otherCA: other.WriteCA(t, dir)}
	p.serverCert, p.serverKey = testcert.WritePair(t, dir, "server", ca.Server(t, "greeter.internal"))
	p.clientCert, p.clientKey = testcert.WritePair(t, dir, "client", ca.Client(t, "consumer"))
	p.strangerCert, p.strangerKey = testcert.WritePair(t, dir, "stranger", other.Client(t, "stranger"))
	p.otherSrvCert, p.otherSrvKey = testcert.WritePair(t, dir, "other-server", other.Server(t))
	return p
}

// parseYAML parses a configuration written for the test.
func parseYAML(t *testing.T, format string, args ...any) *config.Config {
	t.Helper()
	c, err := config.Parse(strings.NewReader(fmt.Sprintf(format, args...)))
	require.NoError(t, err)
	return c
}

// tlsProvider starts a provider of e2eInterface from YAML whose port
// speaks TLS (mutual when clientCA is set) and registers it in reg.
func tlsProvider(ctx context.Context, t *testing.T, reg registry.Registry, tlsYAML string) {
	t.Helper()
	tlsProviderURL(ctx, t, reg, tlsYAML)
}

// tlsProviderURL is tlsProvider, returning the registered URL.
func tlsProviderURL(ctx context.Context, t *testing.T, reg registry.Registry, tlsYAML string) *protocol.URL {
	t.Helper()
	c := parseYAML(t, `
application: {name: tls-provider}
registries: {reg: {address: "memory://tls"}}
protocols:
  dubbo:
    host: 127.0.0.1
%s
services:
  named: {interface: %s}
`, tlsYAML, e2eInterface)
	app, err := config.New(c, config.WithRegistry("reg", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	u, err := app.Export(ctx, "named", named{name: "tls"})
	require.NoError(t, err)
	return u
}

// tlsConsumer refers e2eInterface from YAML (the "references.named"
// extra lines and the top-level extra lines given) and returns the stub.
func tlsConsumer(ctx context.Context, t *testing.T, reg registry.Registry, refYAML, topYAML string) *namedClient {
	t.Helper()
	c := parseYAML(t, `
application: {name: tls-consumer}
registries: {reg: {address: "memory://tls"}}
%s
references:
  named:
    interface: %s
    retries: 0
    timeout: 60s # the first call's TLS dial under -race at load: since c33e3d0 the call's timeout bounds it too
%s
`, topYAML, e2eInterface, refYAML)
	app, err := config.New(c, config.WithRegistry("reg", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	var cl namedClient
	require.NoError(t, app.Refer(ctx, "named", &cl))
	return &cl
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}

// TestTLSFromYAML: a provider whose port asks for client certificates
// (mutual TLS) and consumers configured in YAML, over real TCP on
// loopback: the right consumer calls, every wrong one gets an error that
// says what is wrong and what to set.
func TestTLSFromYAML(t *testing.T) {
	ctx := testCtx(t)
	p := newPKI(t)
	reg := memory.New()
	tlsProvider(ctx, t, reg, indent(4, fmt.Sprintf(`
tls:
  cert_file: %s
  key_file: %s
  client_ca_file: %s`, p.serverCert, p.serverKey, p.ca)))

	refTLS := func(lines string) string { return indent(4, "tls:\n"+indent(2, lines)) }
	call := func(cl *namedClient) (string, error) { return cl.Who(ctx, 1) }

	t.Run("mutual TLS", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, refTLS(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s", p.ca, p.clientCert, p.clientKey)), "")
		got, err := call(cl)
		require.NoError(t, err)
		require.Equal(t, "tls:1", got)
	})
	t.Run("consumer.tls is the default of every reference", func(t *testing.T) {
		top := "consumer:\n" + indent(2, "tls:\n"+indent(2, fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s\nserver_name: greeter.internal", p.ca, p.clientCert, p.clientKey)))
		cl := tlsConsumer(ctx, t, reg, "", top)
		got, err := call(cl)
		require.NoError(t, err)
		require.Equal(t, "tls:1", got)
	})
	t.Run("a reference's tls beats consumer.tls", func(t *testing.T) {
		top := "consumer:\n" + indent(2, "tls:\n"+indent(2, "ca_file: "+p.otherCA))
		cl := tlsConsumer(ctx, t, reg, refTLS(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s", p.ca, p.clientCert, p.clientKey)), top)
		_, err := call(cl)
		require.NoError(t, err)
	})
	t.Run("no TLS", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, "", "")
		_, err := call(cl)
		t.Log(err)
		require.ErrorIs(t, err, dubbo.ErrTLSRequired)
		require.ErrorContains(t, err, "the provider requires TLS (tls=true on its URL), and this reference has no TLS configuration: set references.named.tls or consumer.tls")
	})
	t.Run("no client certificate", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, refTLS("ca_file: "+p.ca), "")
		_, err := call(cl)
		t.Log(err)
		require.ErrorIs(t, err, dubbo.ErrClientCertRequired)
		require.ErrorContains(t, err, "the provider requires a client certificate (mtls=true on its URL), and this reference's TLS configuration has none: set cert_file and key_file in references.named.tls")
	})
	t.Run("CA that does not trust the provider", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, refTLS(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s", p.otherCA, p.clientCert, p.clientKey)), "")
		_, err := call(cl)
		t.Log(err)
		require.ErrorIs(t, err, status.ErrDial)
		require.ErrorContains(t, err, "tls: failed to verify certificate: x509: certificate signed by unknown authority")
	})
	t.Run("wrong server name", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, refTLS(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s\nserver_name: wrong.example", p.ca, p.clientCert, p.clientKey)), "")
		_, err := call(cl)
		t.Log(err)
		require.ErrorIs(t, err, status.ErrDial)
		require.ErrorContains(t, err, "certificate is valid for greeter.internal, not wrong.example")
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		cl := tlsConsumer(ctx, t, reg, refTLS(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s", p.ca, p.strangerCert, p.strangerKey)), "")
		// Under TLS 1.3 the provider's refusal arrives after the
		// consumer's handshake; the first call may only see the
		// connection drop, the next ones say why.
		require.Eventually(t, func() bool {
			_, err := call(cl)
			return err != nil && strings.Contains(err.Error(), "remote error: tls: certificate required")
		}, 10*time.Second, 10*time.Millisecond)
	})
}

// TestTLSConsumerRefusesPlaintext: a reference with TLS does not call a
// provider that does not publish tls=true in plain TCP.
func TestTLSConsumerRefusesPlaintext(t *testing.T) {
	ctx := testCtx(t)
	p := newPKI(t)
	reg := memory.New()
	tlsProvider(ctx, t, reg, "")
	cl := tlsConsumer(ctx, t, reg, indent(4, "tls: {ca_file: "+p.ca+"}"), "")
	_, err := cl.Who(ctx, 1)
	require.ErrorIs(t, err, config.ErrPlaintextProvider)
	require.ErrorContains(t, err, "the provider does not speak TLS (no tls=true on its URL), and this reference speaks only TLS (references.named.tls, consumer.tls or WithClientTLS)")
}

// TestTLSDirectURL: a reference with a url key and tls calls a TLS
// provider directly (one-way TLS, no registry on the consumer); without
// tls it is told why.
func TestTLSDirectURL(t *testing.T) {
	ctx := testCtx(t)
	p := newPKI(t)
	u := tlsProviderURL(ctx, t, memory.New(), indent(4, fmt.Sprintf("tls: {cert_file: %s, key_file: %s}", p.serverCert, p.serverKey)))
	require.Equal(t, "true", u.Param(dubbo.KeyTLS, ""))
	require.Empty(t, u.Param(dubbo.KeyMTLS, ""))
	direct := func(tlsYAML string) (string, error) {
		c := parseYAML(t, `
references:
  named:
    interface: %s
    url: %s
    retries: 0
%s
`, e2eInterface, u.Address(), tlsYAML)
		app, err := config.New(c, config.WithLogger(logger(t)))
		require.NoError(t, err)
		defer app.Shutdown(context.Background())
		var cl namedClient
		require.NoError(t, app.Refer(ctx, "named", &cl))
		return cl.Who(ctx, 7)
	}
	got, err := direct(indent(4, "tls: {ca_file: "+p.ca+"}"))
	require.NoError(t, err)
	require.Equal(t, "tls:7", got)
	// Without tls the consumer cannot know from the url that the port
	// speaks TLS; the provider answers its plain request why.
	_, err = direct("")
	t.Log(err)
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, "this provider port speaks TLS and the request came in plain TCP: configure TLS on the consumer")
}

// TestTLSFileErrors: every bad file is reported by New, naming its key and
// path and what is wrong with it.
func TestTLSFileErrors(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(p.dir, "missing.pem")
	notPEM := filepath.Join(p.dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	expired := testcert.NewCA(t, "old")
	oldCert := expired.ServerValid(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	oldCertFile, oldKeyFile := testcert.WritePair(t, p.dir, "old", oldCert)

	server := func(cert, key, ca string) *config.Config {
		return &config.Config{Protocols: map[string]config.ProtocolConfig{"dubbo": {TLS: &config.ServerTLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: ca}}}}
	}
	client := func(t *config.ClientTLSConfig) *config.Config {
		return &config.Config{
			Registries: map[string]config.RegistryConfig{"reg": {Address: "memory://x"}},
			References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", TLS: t}},
		}
	}
	for _, tc := range []struct {
		name string
		c    *config.Config
		want string
	}{
		{"missing cert", server(missing, p.serverKey, ""), "config: protocols.dubbo.tls.cert_file: open " + missing + ": no such file or directory"},
		{"missing key", server(p.serverCert, missing, ""), "config: protocols.dubbo.tls.key_file: open " + missing + ": no such file or directory"},
		{"unreadable cert", server(p.dir, p.serverKey, ""), "config: protocols.dubbo.tls.cert_file: read " + p.dir + ": is a directory"},
		{"cert not PEM", server(notPEM, p.serverKey, ""), fmt.Sprintf("config: protocols.dubbo.tls.cert_file %q: no PEM certificate in it", notPEM)},
		{"key not PEM", server(p.serverCert, notPEM, ""), fmt.Sprintf("config: protocols.dubbo.tls.key_file %q: no PEM private key in it", notPEM)},
		{"key and cert swapped", server(p.serverKey, p.serverCert, ""), fmt.Sprintf("config: protocols.dubbo.tls.cert_file %q: a PEM \"PRIVATE KEY\" block where certificates go", p.serverKey)},
		{"key of another cert", server(p.serverCert, p.clientKey, ""), fmt.Sprintf("config: protocols.dubbo.tls: key_file %q does not go with cert_file %q: tls: private key does not match public key", p.clientKey, p.serverCert)},
		{"expired cert", server(oldCertFile, oldKeyFile, ""), fmt.Sprintf("config: protocols.dubbo.tls.cert_file %q: the certificate expired at", oldCertFile)},
		{"missing client CA", server(p.serverCert, p.serverKey, missing), "config: protocols.dubbo.tls.client_ca_file: open " + missing},
		{"client CA not PEM", server(p.serverCert, p.serverKey, notPEM), fmt.Sprintf("config: protocols.dubbo.tls.client_ca_file %q: no PEM certificate in it", notPEM)},
		{"server without key", server(p.serverCert, "", ""), "config: protocols.dubbo.tls: cert_file and key_file are both required"},
		{"missing CA", client(&config.ClientTLSConfig{CAFile: missing}), "config: references.greeter.tls.ca_file: open " + missing},
		{"client key of another cert", client(&config.ClientTLSConfig{CertFile: p.clientCert, KeyFile: p.serverKey}), fmt.Sprintf("config: references.greeter.tls: key_file %q does not go with cert_file %q", p.serverKey, p.clientCert)},
		{"client cert without key", client(&config.ClientTLSConfig{CertFile: p.clientCert}), "config: references.greeter.tls: cert_file and key_file go together"},
		{"consumer default", &config.Config{Consumer: config.ConsumerConfig{TLS: &config.ClientTLSConfig{CAFile: notPEM}}}, fmt.Sprintf("config: consumer.tls.ca_file %q: no PEM certificate in it", notPEM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.New(tc.c, config.WithLogger(logger(t)))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestTLSGoOptions: WithServerTLS and WithClientTLS name a protocol or
// reference that exists, and do not silently beat a tls key.
func TestTLSGoOptions(t *testing.T) {
	p := newPKI(t)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	c := func() *config.Config {
		return &config.Config{
			Registries: map[string]config.RegistryConfig{"reg": {Address: "memory://x"}},
			Protocols:  map[string]config.ProtocolConfig{"dubbo": {TLS: &config.ServerTLSConfig{CertFile: p.serverCert, KeyFile: p.serverKey}}},
			References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", TLS: &config.ClientTLSConfig{CAFile: p.ca}}},
		}
	}
	for _, tc := range []struct {
		name string
		opt  config.Option
		want string
	}{
		{"unknown protocol", config.WithServerTLS("dubo", cfg), `config: WithServerTLS: unknown protocol "dubo" (known: dubbo)`},
		{"protocol set twice", config.WithServerTLS("dubbo", cfg), `config: WithServerTLS "dubbo": protocols.dubbo.tls is set too; give one`},
		{"unknown reference", config.WithClientTLS("greter", cfg), `config: WithClientTLS: unknown reference "greter" (known: greeter)`},
		{"reference set twice", config.WithClientTLS("greeter", cfg), `config: WithClientTLS: references.greeter.tls is set too; give one`},
		{"nil", config.WithClientTLS("", nil), `config: WithClientTLS "": nil *tls.Config`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.New(c(), tc.opt, config.WithLogger(logger(t)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	app, err := config.New(c(), config.WithClientTLS("", cfg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	require.NoError(t, app.Shutdown(context.Background()))
}

// TestE2ETLSFromYAML: with a real ZooKeeper, a provider configured in YAML
// for mutual TLS registers tls=true and mtls=true; a consumer configured
// in YAML with its CA and certificate calls it, one without TLS is told
// what to set.
func TestE2ETLSFromYAML(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	p := newPKI(t)
	registries := func(dir string) string {
		return fmt.Sprintf("registries:\n  zk: {address: %q, zookeeper: {session_timeout: 2s}, timeout: 5s, cache_file: %q}",
			zkc.Address(), filepath.Join(dir, "providers.cache"))
	}

	prov, err := config.New(parseYAML(t, `
application: {name: tls-e2e-provider}
%s
protocols:
  dubbo:
    tls:
      cert_file: %s
      key_file: %s
      client_ca_file: %s
services:
  named: {interface: %s}
`, registries(t.TempDir()), p.serverCert, p.serverKey, p.ca, e2eInterface), config.WithLogger(logger(t)))
	require.NoError(t, err)
	defer prov.Shutdown(context.Background())
	u, err := prov.Export(ctx, "named", named{name: "zk-tls"})
	require.NoError(t, err)
	kids := waitProviders(ctx, t, raw, u.Address())
	registered, err := protocol.ParseURL(kids[0])
	require.NoError(t, err)
	require.Equal(t, "true", registered.Param(dubbo.KeyTLS, ""))
	require.Equal(t, "true", registered.Param(dubbo.KeyMTLS, ""))

	consumer := func(tlsYAML string) (string, error) {
		app, err := config.New(parseYAML(t, `
application: {name: tls-e2e-consumer}
%s
references:
  named:
    interface: %s
    check: true
%s
`, registries(t.TempDir()), e2eInterface, tlsYAML), config.WithLogger(logger(t)))
		require.NoError(t, err)
		defer app.Shutdown(context.Background())
		var cl namedClient
		if err := app.Refer(ctx, "named", &cl); err != nil {
			return "", err
		}
		return cl.Who(ctx, 3)
	}
	got, err := consumer(indent(4, fmt.Sprintf("tls: {ca_file: %s, cert_file: %s, key_file: %s}", p.ca, p.clientCert, p.clientKey)))
	require.NoError(t, err)
	require.Equal(t, "zk-tls:3", got)
	// With check: true, Refer itself fails when every provider is refused
	// for its TLS.
	_, err = consumer("")
	require.ErrorIs(t, err, dubbo.ErrTLSRequired)
	require.ErrorContains(t, err, "config: refer named: check: config: references.named: provider "+u.Address()+": the provider requires TLS")
	require.ErrorContains(t, err, "set references.named.tls or consumer.tls")
}
