package dubbo_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
)

// selfSigned returns a server config with a certificate for 127.0.0.1 made
// for this test, and a client config that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "minidubbo test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func TestTLS(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := selfSigned(t)
	srv := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, u := export(t, srv, providerURL("demo.Greeter"))

	inv := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: clientTLS}), u)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"tls"}})
	require.NoError(t, err)
	require.Equal(t, "hello tls", res.Value)

	// A consumer that does not trust the certificate cannot dial.
	untrusting := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}}), u)
	_, err = untrusting.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, exchange.ErrDial)
}
