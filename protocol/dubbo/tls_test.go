package dubbo_test

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
)

// tlsURL is providerURL with the test's timeout for calls: the call's
// timeout bounds its wait for the first dial (c33e3d0), and a TLS dial
// under -race on a loaded machine can take longer than the default 1 s
// (TestTLS's untrusting consumer ran out of it in 2 of 80 runs at load
// ~12, and in a clean-clone CI run).
func tlsURL(iface string) *protocol.URL {
	return providerURL(iface, protocol.KeyTimeout, testTimeoutMillis)
}

func TestTLS(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	srv := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, u := export(t, srv, tlsURL("demo.Greeter"))

	inv := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: clientTLS}), u)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"tls"}})
	require.NoError(t, err)
	require.Equal(t, "hello tls", res.Value)

	// A consumer that does not trust the certificate cannot dial.
	untrusting := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}}), u)
	_, err = untrusting.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrDial)
}

// TestTLSRequiredIsPublished: a TLS port says so on its URL, and a consumer
// without TLS is told why at refer time instead of seeing its connections
// dropped.
func TestTLSRequiredIsPublished(t *testing.T) {
	serverTLS, _ := testcert.SelfSigned(t)
	srv := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, u := export(t, srv, providerURL("demo.Greeter"))
	require.Equal(t, "true", u.Param(dubbo.KeyTLS, ""))
	_, err := newProtocol(t, nil).Refer(u)
	require.ErrorContains(t, err, "the provider requires TLS")

	_, plain := export(t, newProtocol(t, nil), providerURL("demo.Plain"))
	require.Empty(t, plain.Param(dubbo.KeyTLS, ""))
}

// referTLS is refer with its own TLS configuration.
func referTLS(t *testing.T, p *dubbo.Protocol, u *protocol.URL, cfg *tls.Config) protocol.Invoker {
	t.Helper()
	inv, err := p.ReferTLS(u, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { inv.(interface{ Close() error }).Close() })
	return inv
}

// TestMutualTLS: a port that requires client certificates says mtls=true,
// a consumer without one is told at refer time, a consumer whose
// certificate another CA signed is refused by the provider, and one with a
// certificate of the right CA gets through.
func TestMutualTLS(t *testing.T) {
	ctx := testCtx(t)
	ca, other := testcert.NewCA(t, "ca"), testcert.NewCA(t, "other")
	srv := newProtocol(t, nil)
	exp, err := srv.ExportTLS(&greeter{u: tlsURL("demo.Greeter"), release: make(chan struct{})}, &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	})
	require.NoError(t, err)
	u := exp.URL()
	require.Equal(t, "true", u.Param(dubbo.KeyTLS, ""))
	require.Equal(t, "true", u.Param(dubbo.KeyMTLS, ""))

	cli := newProtocol(t, nil)
	_, err = cli.ReferTLS(u, &tls.Config{RootCAs: ca.Pool()})
	require.ErrorIs(t, err, dubbo.ErrClientCertRequired)
	require.ErrorContains(t, err, "the provider requires a client certificate (mtls=true on its URL) and this consumer's TLS configuration has none")
	_, err = cli.Refer(u)
	require.ErrorIs(t, err, dubbo.ErrTLSRequired)

	good := referTLS(t, cli, u, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Client(t, "good")}})
	res, err := good.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"mtls"}})
	require.NoError(t, err)
	require.Equal(t, "hello mtls", res.Value)

	// Same address, another configuration: another connection, refused by
	// the provider, while the good one goes on.
	stranger := referTLS(t, cli, u, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{other.Client(t, "stranger")}})
	// Under TLS 1.3 the provider's refusal arrives after the consumer's
	// handshake ended, so the first call may see a bare lost connection;
	// the reason follows.
	require.Eventually(t, func() bool {
		_, err := stranger.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
		return err != nil && strings.Contains(err.Error(), "remote error: tls: certificate required")
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return srv.Stats().FailedHandshakes > 0 }, 10*time.Second, time.Millisecond)
	res, err = good.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"again"}})
	require.NoError(t, err)
	require.Equal(t, "hello again", res.Value)

	// A consumer that trusts another CA does not accept the provider.
	untrusting := referTLS(t, cli, u, &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{other.Client(t, "x")}})
	_, err = untrusting.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrDial)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
}

// TestExportTLSPerPort: the services of a port share its TLS
// configuration; another port may speak plain TCP next to it, and a TLS
// configuration below TLS 1.2 is raised to it.
func TestExportTLSPerPort(t *testing.T) {
	ca := testcert.NewCA(t, "ca")
	srv := newProtocol(t, nil)
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}, MinVersion: tls.VersionTLS10}
	exp, err := srv.ExportTLS(&greeter{u: tlsURL("demo.A"), release: make(chan struct{})}, cfg)
	require.NoError(t, err)
	u := exp.URL()
	require.Empty(t, u.Param(dubbo.KeyMTLS, ""))
	_, err = srv.ExportTLS(&greeter{u: protocol.NewURL("dubbo", "127.0.0.1", u.Port, "demo.B", nil), release: make(chan struct{})}, &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}})
	require.ErrorContains(t, err, "already serves another TLS configuration")
	_, plain := export(t, srv, protocol.NewURL("dubbo", "localhost", 0, "demo.Plain", nil))
	require.Empty(t, plain.Param(dubbo.KeyTLS, ""))

	ctx := testCtx(t)
	old := referTLS(t, newProtocol(t, nil), u, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11})
	_, err = old.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrDial)
	ok := referTLS(t, newProtocol(t, nil), u, &tls.Config{RootCAs: ca.Pool()})
	res, err := ok.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"a"}})
	require.NoError(t, err)
	require.Equal(t, "hello a", res.Value)
}

// TestPlainConsumerOnTLSPort: a consumer that does not know the port
// speaks TLS (a URL without tls=true, typed by hand) is answered why, not
// dropped; a TLS consumer on the same port is served as before.
func TestPlainConsumerOnTLSPort(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	srvProto := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, u := export(t, srvProto, tlsURL("demo.Greeter"))
	bare := protocol.NewURL("dubbo", u.Host, u.Port, u.Path, nil)
	plain := refer(t, newProtocol(t, nil), bare)
	_, err := plain.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, exchange.PlainOnTLSMessage)
	require.Positive(t, srvProto.Stats().FailedHandshakes) // and more as the consumer re-dials

	secure := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: clientTLS}), u)
	res, err := secure.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"tls"}})
	require.NoError(t, err)
	require.Equal(t, "hello tls", res.Value)
}
