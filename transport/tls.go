package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles names PEM files for Config.TLS.
type TLSFiles struct {
	// CertFile and KeyFile are the certificate this node's server presents.
	CertFile, KeyFile string
	// CAFile holds the CA certificates that verify peers: the servers this
	// node dials and, with mutual TLS, the clients that dial it. Empty means
	// the system roots for servers (and mutual TLS is then impossible).
	CAFile string
	// ClientCertFile and ClientKeyFile are presented when dialling peers.
	// Setting them turns on mutual TLS in both directions: this node's
	// server then requires every client to present a certificate that
	// CAFile verifies, since a cluster's nodes share one TLS setup.
	ClientCertFile, ClientKeyFile string
	// ServerName is the name expected in peers' certificates; empty means
	// the host part of the address dialled (an IP address SAN, then).
	ServerName string
}

// Load reads the files and returns the server and client configurations.
func (f TLSFiles) Load() (server, client *tls.Config, err error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, nil, fmt.Errorf("%w: TLS.CertFile (%q) and TLS.KeyFile (%q) are both required", ErrBadConfig, f.CertFile, f.KeyFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: TLS server certificate: %v", ErrBadConfig, err)
	}
	var pool *x509.CertPool
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: TLS.CAFile: %v", ErrBadConfig, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%w: TLS.CAFile %q holds no PEM certificate", ErrBadConfig, f.CAFile)
		}
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	client = &tls.Config{RootCAs: pool, ServerName: f.ServerName, MinVersion: tls.VersionTLS13}
	if f.ClientCertFile != "" || f.ClientKeyFile != "" {
		if pool == nil {
			return nil, nil, fmt.Errorf("%w: mutual TLS (ClientCertFile %q) needs TLS.CAFile to verify clients", ErrBadConfig, f.ClientCertFile)
		}
		ccert, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: TLS client certificate: %v", ErrBadConfig, err)
		}
		client.Certificates = []tls.Certificate{ccert}
		server.ClientAuth = tls.RequireAndVerifyClientCert
		server.ClientCAs = pool
	}
	return server, client, nil
}
