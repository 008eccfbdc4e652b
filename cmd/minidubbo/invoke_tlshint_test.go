package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/testcert"
)

// TestInvokeTLSHandshakeHints: a call made with the -tls flags whose TLS
// handshake fails is not asked whether a provider runs there (one does):
// a plain provider is named as a possible cause, with the way to call it,
// and a certificate the call does not trust points to -tls-ca.
func TestInvokeTLSHandshakeHints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "hint")
	srvCert, srvKey := testcert.WritePair(t, dir, "server", ca.Server(t))
	plainApp, err := config.New(&config.Config{Services: map[string]config.ServiceConfig{"echo": {Interface: "cli.Echo"}}})
	require.NoError(t, err)
	defer plainApp.Shutdown(ctx)
	plain, err := plainApp.Export(ctx, "echo", tlsEcho{})
	require.NoError(t, err)
	tlsApp, err := config.New(&config.Config{
		Protocols: map[string]config.ProtocolConfig{"dubbo": {TLS: &config.ServerTLSConfig{CertFile: srvCert, KeyFile: srvKey}}},
		Services:  map[string]config.ServiceConfig{"echo": {Interface: "cli.Echo"}},
	})
	require.NoError(t, err)
	defer tlsApp.Shutdown(ctx)
	secured, err := tlsApp.Export(ctx, "echo", tlsEcho{})
	require.NoError(t, err)

	// The calls get a minute: their timeout also bounds the wait for the
	// first dial (c33e3d0), and the handshake's failure, not the
	// timeout, is what is looked at. A minute is an upper bound only:
	// each call ends when its handshake fails.

	// -tls against a provider that speaks plain TCP.
	_, errOut, code := runCLI(t, "invoke", "-url", plain.Address(), "-tls", "-timeout", "1m", "-service", "cli.Echo", "-method", "Echo", "-args", `["x"]`)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "tls handshake with "+plain.Address())
	assert.NotContains(t, errOut, "is a provider running there?")
	assert.True(t, strings.HasSuffix(errOut, "\n(the TLS handshake failed: does the provider there speak TLS? "+
		"Leave out the -tls flags to call one that does not)\n"), errOut)

	// -tls with the system's CAs against a certificate a private CA signed.
	_, errOut, code = runCLI(t, "invoke", "-url", secured.Address(), "-tls", "-timeout", "1m", "-service", "cli.Echo", "-method", "Echo", "-args", `["x"]`)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "x509:")
	assert.NotContains(t, errOut, "is a provider running there?")
	assert.True(t, strings.HasSuffix(errOut, "\n(the provider's certificate is not trusted: give -tls-ca with the CA file "+
		"that signed it, and -tls-server-name when it is valid for another name than the address's host)\n"), errOut)
}
