package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock/clientapi"
)

// apiClientFlags are how `homelock lock` and `homelock status` reach a
// node's client API: its address, TLS, and a bearer token. Each flag's
// default comes from its environment variable, so a shell profile can set
// them once.
type apiClientFlags struct {
	node, ca, cert, key, serverName, tokenFile string
}

// apiClientHelp documents the flags' environment variables in --help.
const apiClientHelp = `The client API flags default to environment variables: HOMELOCK_NODE,
HOMELOCK_TLS_CA, HOMELOCK_TLS_CERT, HOMELOCK_TLS_KEY, HOMELOCK_TLS_SERVER_NAME
and HOMELOCK_TOKEN_FILE. Any of --tls-ca, --tls-cert or --tls-server-name
turns on TLS (--tls-ca empty: the system's roots verify the node). A token is
sent only over TLS or to a loopback address.
`

func (f *apiClientFlags) register(fs *flag.FlagSet) {
	env := func(name, def string) string { return cmp.Or(os.Getenv(name), def) }
	fs.StringVar(&f.node, "node", env("HOMELOCK_NODE", defaultAPIAddr), "client API address of a homelock node, or several of one cluster, comma-separated, each tried when those before it cannot serve ($HOMELOCK_NODE)")
	fs.StringVar(&f.ca, "tls-ca", env("HOMELOCK_TLS_CA", ""), "PEM CA that verifies the node's API certificate; turns on TLS ($HOMELOCK_TLS_CA)")
	fs.StringVar(&f.cert, "tls-cert", env("HOMELOCK_TLS_CERT", ""), "PEM client certificate, for a node that requires mutual TLS ($HOMELOCK_TLS_CERT)")
	fs.StringVar(&f.key, "tls-key", env("HOMELOCK_TLS_KEY", ""), "PEM key for --tls-cert ($HOMELOCK_TLS_KEY)")
	fs.StringVar(&f.serverName, "tls-server-name", env("HOMELOCK_TLS_SERVER_NAME", ""), "name expected in the node's certificate, if not --node's host ($HOMELOCK_TLS_SERVER_NAME)")
	fs.StringVar(&f.tokenFile, "token-file", env("HOMELOCK_TOKEN_FILE", ""), "file holding the bearer token the node requires ($HOMELOCK_TOKEN_FILE)")
}

// nodes are --node's addresses, in the order they are tried.
func (f *apiClientFlags) nodes() ([]string, error) {
	nodes := strings.Split(f.node, ",")
	for i, n := range nodes {
		nodes[i] = strings.TrimSpace(n)
		if nodes[i] == "" {
			return nil, fmt.Errorf("--node %q: an empty address", f.node)
		}
	}
	return nodes, nil
}

// transportCredentials are TLS if any TLS flag is set, else plaintext.
func (f *apiClientFlags) transportCredentials() (credentials.TransportCredentials, error) {
	if f.ca == "" && f.cert == "" && f.key == "" && f.serverName == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: f.serverName}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.ca)
		}
	}
	if f.cert != "" || f.key != "" {
		if f.cert == "" || f.key == "" {
			return nil, fmt.Errorf("--tls-cert and --tls-key go together")
		}
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return credentials.NewTLS(cfg), nil
}

// dial connects to the node's client API and waits for the connection, up to
// ctx's deadline: an unreachable node, a refused TLS handshake or a wrong
// address fail here, with the reason, rather than in the first call.
func (f *apiClientFlags) dial(ctx context.Context) (*grpc.ClientConn, error) {
	conn, err := f.client()
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w%s", f.node, err, f.hint(err))
	}
	return conn, nil
}

// client makes the connection without connecting: the first call does,
// bounded by that call's context, so a node that is paused or a port that
// accepts and never answers costs the caller its own deadline, never gRPC's
// 20 s connect timeout.
func (f *apiClientFlags) client() (*grpc.ClientConn, error) {
	creds, err := f.transportCredentials()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if f.tokenFile != "" {
		tok, err := clientapi.ReadTokenFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(clientapi.BearerToken(tok, f.node)))
	}
	return grpc.NewClient(f.node, opts...)
}

// hint says what a failed connection may mean. Under TLS 1.3 a server that
// refuses the client's certificate (or its absence) does so after the
// client's handshake is done, so the client sees a closed connection whose
// message may name no cause; and a client whose certificate is not from a CA
// the server asks for sends none, so "certificate required" can mean either.
func (f *apiClientFlags) hint(err error) string {
	msg := err.Error()
	tlsOn := f.ca != "" || f.cert != "" || f.serverName != ""
	switch {
	case !tlsOn && strings.Contains(msg, "http2: frame too large"), !tlsOn && strings.Contains(msg, "first record does not look like a TLS handshake"),
		!tlsOn && strings.Contains(msg, "connection reset"), !tlsOn && strings.Contains(msg, "EOF"):
		return " (if the node's client API has TLS, give --tls-ca)"
	case tlsOn && f.cert == "" && strings.Contains(msg, "certificate required"):
		return " (the node requires mutual TLS: give --tls-cert and --tls-key)"
	case tlsOn && f.cert == "" && !strings.Contains(msg, "x509:") && !strings.Contains(msg, "connection refused"):
		return " (if the node requires mutual TLS, give --tls-cert and --tls-key)"
	case tlsOn && f.cert != "" && !strings.Contains(msg, "x509:") && !strings.Contains(msg, "connection refused"):
		return " (the node may not accept this client certificate: is it from the node's --api-client-ca?)"
	case strings.Contains(msg, "connection refused"):
		return " (no homelock node's client API there: is the node running, and is this its --api-addr?)"
	}
	return ""
}

// errNoConnection is why dial failed when no connection to the node was
// made (refused, unreachable, the handshake failed, no answer in time).
var errNoConnection = errors.New("no connection")

// waitReady makes one health check: it connects, and returns the reason if
// the connection fails (refused, TLS handshake). A node that answers at all,
// even without a health service, is reachable.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errNoConnection, ctx.Err())
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		return fmt.Errorf("%w: %s", errNoConnection, s.Message())
	}
	return nil
}
