package dubbo_test

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
)

func TestTLS(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	srv := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, u := export(t, srv, providerURL("demo.Greeter"))

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
