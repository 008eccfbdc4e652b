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
