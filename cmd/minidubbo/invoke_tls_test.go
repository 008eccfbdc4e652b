package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/testcert"
)

type tlsEcho struct{}

func (tlsEcho) Echo(_ context.Context, s string) (string, error) { return s, nil }

// TestInvokeTLS: invoke reaches a provider whose port wants client
// certificates with -tls-ca, -tls-cert and -tls-key, and without them says
// which flags to give.
func TestInvokeTLS(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "cli")
	caFile := ca.WriteCA(t, dir)
	srvCert, srvKey := testcert.WritePair(t, dir, "server", ca.Server(t))
	cliCert, cliKey := testcert.WritePair(t, dir, "client", ca.Client(t, "cli"))
	app, err := config.New(&config.Config{
		Protocols: map[string]config.ProtocolConfig{"dubbo": {TLS: &config.ServerTLSConfig{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile}}},
		Services:  map[string]config.ServiceConfig{"echo": {Interface: "cli.Echo"}},
	})
	require.NoError(t, err)
	defer app.Shutdown(ctx)
	u, err := app.Export(ctx, "echo", tlsEcho{})
	require.NoError(t, err)

	call := func(flags ...string) (string, string, int) {
		return runCLI(t, append([]string{"invoke", "-url", u.Address(), "-service", "cli.Echo", "-method", "Echo", "-args", `["tls"]`, "-json"}, flags...)...)
	}
	out, errOut, code := call("-tls-ca", caFile, "-tls-cert", cliCert, "-tls-key", cliKey)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"tls\"\n", out)

	_, errOut, code = call()
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "this provider port speaks TLS and the request came in plain TCP")
	assert.Contains(t, errOut, "(give -tls, or -tls-ca with the CA file that signed the provider's certificate)")

	// The provider's refusal comes after the client's side of a TLS 1.3
	// handshake ended: the call usually reads it, but a write may meet
	// the closed connection first.
	require.Eventually(t, func() bool {
		_, errOut, code := call("-tls-ca", caFile)
		return code == 1 && strings.Contains(errOut, "remote error: tls: certificate required")
	}, 20*time.Second, 10*time.Millisecond)

	_, errOut, code = call("-tls-cert", cliCert)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-tls-cert and -tls-key go together")
}
