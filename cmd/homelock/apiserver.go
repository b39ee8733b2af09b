package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
)

// apiServerFlags secure the client API that `homelock node` serves.
type apiServerFlags struct {
	addr, cert, key, clientCA, tokenFile string
}

func (f *apiServerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "api-addr", defaultAPIAddr, "host:port of the client API (homelock lock/status); keep it on loopback unless it has TLS")
	fs.StringVar(&f.cert, "api-tls-cert", "", "PEM certificate the client API presents; turns on TLS")
	fs.StringVar(&f.key, "api-tls-key", "", "PEM key for --api-tls-cert")
	fs.StringVar(&f.clientCA, "api-client-ca", "", "PEM CA that verifies client certificates: with it, the client API requires mutual TLS")
	fs.StringVar(&f.tokenFile, "api-token-file", "", "file holding a bearer token every client API call must carry (clients: --token-file)")
}

// serverOptions are the client API server's credentials and interceptors.
func (f *apiServerFlags) serverOptions() ([]grpc.ServerOption, error) {
	var opts []grpc.ServerOption
	if f.cert != "" || f.key != "" {
		if f.cert == "" || f.key == "" {
			return nil, errors.New("--api-tls-cert and --api-tls-key go together")
		}
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--api-tls-cert: %w", err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS13}
		if f.clientCA != "" {
			pem, err := os.ReadFile(f.clientCA)
			if err != nil {
				return nil, fmt.Errorf("--api-client-ca: %w", err)
			}
			cfg.ClientCAs = x509.NewCertPool()
			if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--api-client-ca %s holds no PEM certificate", f.clientCA)
			}
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	} else if f.clientCA != "" {
		return nil, errors.New("--api-client-ca needs --api-tls-cert and --api-tls-key")
	}
	if f.tokenFile != "" {
		tok, err := clientapi.ReadTokenFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--api-token-file: %w", err)
		}
		opts = append(opts, clientapi.RequireToken(tok)...)
	}
	return opts, nil
}

// warnings are what an operator should hear about the API's exposure.
func (f *apiServerFlags) warnings(bound net.Addr) []string {
	if clientapi.IsLoopback(bound.String()) {
		return nil
	}
	var w []string
	if f.cert == "" {
		w = append(w, fmt.Sprintf("the client API on %s is not loopback and has no TLS: anyone who reaches it sees its traffic; set --api-tls-cert and --api-tls-key", bound))
	}
	if f.clientCA == "" && f.tokenFile == "" {
		w = append(w, fmt.Sprintf("the client API on %s is not loopback and authenticates nobody: anyone who reaches it can take or hold any lock; set --api-client-ca or --api-token-file", bound))
	}
	return w
}

// readiness is the node's own verdict (Status.Available: a member of an
// agreed epoch, one protocol version, epoch liveness held), not one made
// here.
func readiness(n *homelock.Node) (bool, string) {
	st := n.Status()
	if st.Available {
		return true, fmt.Sprintf("ready: epoch %d, %d members, liveness %v", st.Epoch, len(st.Members), st.LiveFor.Round(time.Millisecond))
	}
	return false, "not ready: " + st.Reason
}

// clientService is the name the gRPC health service reports readiness under;
// the empty name reports that the process serves.
var clientService = clientapi.Client_ServiceDesc.ServiceName

// watchHealth keeps the health service's status of clientService in step
// with readiness until stop closes.
func watchHealth(n *homelock.Node, hs *health.Server, stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st := grpc_health_v1.HealthCheckResponse_NOT_SERVING
		if ok, _ := readiness(n); ok {
			st = grpc_health_v1.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus(clientService, st)
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// metricsHandler serves /metrics (the node's collector, Go runtime and
// process metrics, on a registry of its own), /healthz and /readyz.
func metricsHandler(n *homelock.Node) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(homelock.NewCollector(n), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Not alive once the store failed: the node has stopped for good,
		// and only a restart brings it back.
		if err := n.Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := readiness(n)
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}

// serveMetrics serves metricsHandler on lis until ctx ends.
func serveMetrics(ctx context.Context, lis net.Listener, n *homelock.Node, log *slog.Logger) {
	srv := &http.Server{Handler: metricsHandler(n), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
}
