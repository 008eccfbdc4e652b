package dubbo_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
)

// tlsMode is how a benchmark's provider and consumer connect: plain
// TCP (both configs nil), TLS, or mutual TLS.
type tlsMode struct {
	name           string
	server, client *tls.Config
}

// tlsModes gives plain, tls and mtls, with ECDSA P-256 certificates of a
// new CA.
func tlsModes(b *testing.B) []tlsMode {
	ca := testcert.NewCA(b, "bench")
	server := &tls.Config{Certificates: []tls.Certificate{ca.Server(b)}}
	mutual := &tls.Config{Certificates: server.Certificates, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	return []tlsMode{
		{"plain", nil, nil},
		{"tls", server, &tls.Config{RootCAs: ca.Pool()}},
		{"mtls", mutual, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Client(b, "bench")}}},
	}
}

// BenchmarkCallTLS is one loopback call with a 581-byte argument and
// reply over plain TCP, TLS and mutual TLS (ECDSA P-256 certificates),
// provider in this process, at 1 and 100 callers: what TLS costs per call
// once the connection is up.
func BenchmarkCallTLS(b *testing.B) {
	for _, m := range tlsModes(b) {
		srv := newProtocol(b, nil)
		exp, err := srv.ExportTLS(echoInvoker{u: providerURL("bench.Echo")}, m.server)
		require.NoError(b, err)
		for _, n := range []int{1, 100} {
			b.Run(m.name+"/callers="+itoa(n), func(b *testing.B) {
				inv, err := newProtocol(b, nil).ReferTLS(exp.URL(), m.client)
				require.NoError(b, err)
				b.Cleanup(func() { inv.(interface{ Close() error }).Close() })
				ctx := context.Background()
				call := func() {
					var reply string
					_, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply})
					if err != nil || len(reply) != len(payload) {
						b.Errorf("call: %v (reply %d bytes)", err, len(reply))
					}
				}
				call()
				run(b, n, call)
			})
		}
	}
}

// BenchmarkConnectTLS is a new connection and its first call: dial, the
// TLS handshake (full, no resumption), one call, close.
func BenchmarkConnectTLS(b *testing.B) {
	for _, m := range tlsModes(b) {
		srv := newProtocol(b, nil)
		exp, err := srv.ExportTLS(echoInvoker{u: providerURL("bench.Echo")}, m.server)
		require.NoError(b, err)
		b.Run(m.name, func(b *testing.B) {
			cli := newProtocol(b, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				inv, err := cli.ReferTLS(exp.URL(), m.client)
				if err != nil {
					b.Fatal(err)
				}
				var reply string
				if _, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply}); err != nil {
					b.Fatal(err)
				}
				inv.(interface{ Close() error }).Close()
			}
		})
	}
}
