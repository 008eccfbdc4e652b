// Package testcert makes a throw-away TLS certificate for 127.0.0.1, for
// tests of TLS connections on loopback.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// SelfSigned returns a server config with a certificate for 127.0.0.1 made
// for this test, valid for an hour around now, and a client config that
// trusts only it.
func SelfSigned(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
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
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// CA is a throw-away certificate authority made for one test: it signs
// server certificates for 127.0.0.1 and client certificates, and writes
// them as PEM files for configurations that name files.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA returns a new CA named name, valid for an hour around now.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return &CA{Cert: cert, key: key}
}

// Pool returns a pool that trusts only ca.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Server returns a server certificate for 127.0.0.1 and the DNS names
// given, signed by ca.
func (ca *CA) Server(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	return ca.issue(t, "server", x509.ExtKeyUsageServerAuth, names, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// ServerValid is Server with a certificate valid from notBefore to
// notAfter (to make an expired one).
func (ca *CA) ServerValid(t testing.TB, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	return ca.issue(t, "server", x509.ExtKeyUsageServerAuth, nil, notBefore, notAfter)
}

// Client returns a client certificate named name, signed by ca.
func (ca *CA) Client(t testing.TB, name string) tls.Certificate {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func (ca *CA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, names []string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     names,
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// WriteCA writes ca's certificate as PEM into dir and returns the file's
// path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, ca.Cert.Subject.CommonName+"-ca.pem")
	writePEM(t, path, "CERTIFICATE", ca.Cert.Raw)
	return path
}

// WritePair writes cert and its key as PEM files name.pem and name.key
// into dir and returns their paths.
func WritePair(t testing.TB, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", cert.Certificate[0])
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", der)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testcert: %v", err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return key
}
