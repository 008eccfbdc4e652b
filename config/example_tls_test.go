package config_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// Mutual TLS set up in Go: the provider's port wants a certificate its
// client CA signed (WithServerTLS), the consumer trusts the provider's CA
// and shows its own certificate (WithClientTLS). In YAML the same is
// protocols.dubbo.tls {cert_file, key_file, client_ca_file} and
// references.greeter.tls {ca_file, cert_file, key_file}. A consumer
// without a certificate is told so before any connection is made.
func ExampleWithServerTLS() {
	ctx := context.Background()
	ca, server, client := exampleCerts()
	reg := memory.New() // one registry shared by both applications

	provider, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"reg": {Address: "memory://tls"}},
		Services:   map[string]config.ServiceConfig{"greeter": {Interface: "demo.Greeter"}},
	}, config.WithRegistry("reg", reg), config.WithServerTLS("dubbo", &tls.Config{
		Certificates: []tls.Certificate{server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca,
	}))
	if err != nil {
		panic(err)
	}
	defer provider.Shutdown(ctx)
	u, err := provider.Export(ctx, "greeter", Greeter{})
	if err != nil {
		panic(err)
	}
	fmt.Println("tls:", u.Param(dubbo.KeyTLS, ""), "mtls:", u.Param(dubbo.KeyMTLS, ""))

	call := func(cfg *tls.Config) {
		consumer, err := config.New(&config.Config{
			Registries: map[string]config.RegistryConfig{"reg": {Address: "memory://tls"}},
			// The call's timeout also bounds its wait for the first
			// connection, a TLS handshake here.
			References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", Timeout: 10 * time.Second}},
		}, config.WithRegistry("reg", reg), config.WithClientTLS("greeter", cfg))
		if err != nil {
			panic(err)
		}
		defer consumer.Shutdown(ctx)
		var g GreeterClient
		if err := consumer.Refer(ctx, "greeter", &g); err != nil {
			panic(err)
		}
		reply, err := g.SayHello(ctx, "tls")
		fmt.Println(reply, errors.Is(err, dubbo.ErrClientCertRequired))
	}
	call(&tls.Config{RootCAs: ca, Certificates: []tls.Certificate{client}})
	call(&tls.Config{RootCAs: ca}) // no client certificate
	// Output:
	// tls: true mtls: true
	// hello, tls false
	//  true
}

// exampleCerts makes a CA, a provider certificate for 127.0.0.1 and a
// consumer certificate, both signed by the CA.
func exampleCerts() (ca *x509.CertPool, server, client tls.Certificate) {
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "example"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			panic(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	ca = x509.NewCertPool()
	ca.AddCert(caCert)
	return ca, issue(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}),
		issue(3, x509.ExtKeyUsageClientAuth, nil)
}
