package transport

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key for 127.0.0.1, usable as server and
// client certificate.
func (ca *testCA) issue(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// mtlsFiles writes a node certificate from ca and returns the files for
// mutual TLS (the same certificate serves and dials).
func mtlsFiles(t *testing.T, ca *testCA, name string) *TLSFiles {
	dir := t.TempDir()
	c, k := ca.issue(t, name)
	cert, key := writeFile(t, dir, "node.pem", c), writeFile(t, dir, "node.key", k)
	return &TLSFiles{CertFile: cert, KeyFile: key, CAFile: writeFile(t, dir, "ca.pem", ca.pem), ClientCertFile: cert, ClientKeyFile: key}
}

// Mutual TLS: nodes with certificates from the cluster CA talk; a client
// without a certificate, one with a certificate from another CA and a
// plaintext client are all refused, and nothing of theirs is delivered.
func TestGRPCMutualTLS(t *testing.T) {
	ca := newTestCA(t, "homelock test CA")
	a := newGRPCNode(t, "a", func(c *Config) { c.TLS = mtlsFiles(t, ca, "a") })
	b := newGRPCNode(t, "b", func(c *Config) { c.TLS = mtlsFiles(t, ca, "b") })
	defer closeAll(t, a.t, b.t)

	env := samples.Envelope(samples.Bodies()[msg.KindAcquire-1])
	require.NoError(t, a.t.Send(b.self, env))
	require.NoError(t, b.t.Send(a.self, env))
	require.Equal(t, env, b.in.waitLen(t, 1, 5*time.Second)[0])
	a.in.waitLen(t, 1, 5*time.Second)

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	rogue := newTestCA(t, "rogue CA")
	rc, rk := rogue.issue(t, "intruder")
	rogueCert, err := tls.X509KeyPair(rc, rk)
	require.NoError(t, err)
	serverOnly := mtlsFiles(t, ca, "s")
	serverTLS, _, err := TLSFiles{CertFile: serverOnly.CertFile, KeyFile: serverOnly.KeyFile}.Load()
	require.NoError(t, err)

	for name, mod := range map[string]func(*Config){
		"no client certificate": func(c *Config) {
			c.ServerTLS, c.ClientTLS = serverTLS, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		},
		"certificate from another CA": func(c *Config) {
			c.ServerTLS, c.ClientTLS = serverTLS, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{rogueCert}, MinVersion: tls.VersionTLS13}
		},
		"plaintext": nil,
	} {
		t.Run(name, func(t *testing.T) {
			x := newGRPCNode(t, "x", mod)
			before := b.in.len()
			for range 5 {
				require.NoError(t, x.t.Send(b.self, env))
				time.Sleep(20 * time.Millisecond)
			}
			b.in.quiet(t, before, 200*time.Millisecond)
			require.Zero(t, x.t.Stats().Sent.Msgs)
			closeAll(t, x.t)
		})
	}
}

func TestTLSFilesLoadErrors(t *testing.T) {
	_, _, err := TLSFiles{}.Load()
	require.ErrorIs(t, err, ErrBadConfig)
	ca := newTestCA(t, "ca")
	f := mtlsFiles(t, ca, "n")
	f.CAFile = ""
	_, _, err = f.Load()
	require.ErrorIs(t, err, ErrBadConfig, "mutual TLS without a CA to verify clients")
}
