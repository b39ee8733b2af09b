package clientapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// authorization is the metadata key a bearer token travels in (RFC 6750).
const authorization = "authorization"

// ReadTokenFile reads a bearer token: the file's content without surrounding
// white space, which must not be empty.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s holds more than one word", path)
	}
	return tok, nil
}

// RequireToken returns the server options that refuse every call to the
// client API without "authorization: Bearer TOKEN", with codes.Unauthenticated.
// The gRPC health service stays open: it says only whether the node serves,
// and probes rarely carry credentials.
func RequireToken(token string) []grpc.ServerOption {
	check := func(ctx context.Context, method string) error {
		if strings.HasPrefix(method, "/"+grpc_health_v1.Health_ServiceDesc.ServiceName+"/") {
			return nil
		}
		md, _ := metadata.FromIncomingContext(ctx)
		vals := md.Get(authorization)
		if len(vals) == 0 {
			return status.Error(codes.Unauthenticated, "homelock client API: no bearer token (the node requires one: --token-file or HOMELOCK_TOKEN_FILE)")
		}
		got, ok := strings.CutPrefix(vals[0], "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return status.Error(codes.Unauthenticated, "homelock client API: wrong bearer token")
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// BearerToken is the client side of RequireToken. It sends the token only
// over TLS, or in plaintext to a loopback address (addr, host:port), where it
// does not leave the machine.
func BearerToken(token, addr string) credentials.PerRPCCredentials {
	return bearer{token: token, secure: !IsLoopback(addr)}
}

type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{authorization: "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// IsLoopback reports whether addr (host:port) names this machine only: a
// loopback IP or "localhost". An empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
