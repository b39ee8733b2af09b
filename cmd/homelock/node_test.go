package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/homelock/homelock/internal/leakcheck"
	"github.com/homelock/homelock/internal/loopback"
)

// lockedBuffer is a bytes.Buffer that a node's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runningNode is one `homelock node` run in this process (serveNode).
type runningNode struct {
	api, metrics string
	stderr       *lockedBuffer
}

var startedLine = regexp.MustCompile(`client API on (\S+?)(?:, metrics on (\S+))?\n`)

// freePort returns a loopback address nothing listens on (memberlist needs
// a fixed port: it binds TCP and UDP to the same one).
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := loopback.Addr()
	require.NoError(t, err)
	return addr
}

// startNode runs a one-node cluster with args added to its flags, and stops
// it (SIGTERM's path: ctx ends) when the test ends, requiring exit status 0.
func startNode(t *testing.T, args ...string) *runningNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	all := append([]string{"--id", "n1", "--cluster", "cmdtest", "--data-dir", filepath.Join(t.TempDir(), "n1"),
		"--bootstrap", "--initial", "n1", "--grpc-addr", "127.0.0.1:0", "--gossip-addr", freePort(t),
		"--api-addr", "127.0.0.1:0", "--epoch-lease", "2s", "--max-lease", "800ms"}, args...)
	exited := make(chan int, 1)
	go func() { exited <- serveNode(ctx, all, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			require.Equal(t, 0, code, "homelock node exit status; stderr:\n%s", stderr)
		case <-time.After(30 * time.Second):
			t.Errorf("homelock node did not stop within 30s; stderr:\n%s", stderr)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := startedLine.FindStringSubmatch(stdout.String()); m != nil {
			return &runningNode{api: m[1], metrics: m[2], stderr: stderr}
		}
		select {
		case code := <-exited:
			exited <- code
			t.Fatalf("homelock node exited with %d before serving; stderr:\n%s", code, stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("homelock node did not start within 20s; stderr:\n%s", stderr)
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A real node with --metrics-addr: /healthz answers at once, /readyz turns
// 200 once the node is available (it is its epoch's only member), /metrics
// holds the node's collector and the Go and process collectors, and the
// client API port serves the gRPC health service for the process and for
// readiness. The node leaves no goroutine behind.
func TestNodeMetricsHealthReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, leaks) }) // after the node's own cleanup
	n := startNode(t, "--metrics-addr", "127.0.0.1:0")
	require.NotEmpty(t, n.metrics)
	base := "http://" + n.metrics

	code, body := httpGet(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	var ready string
	require.Eventually(t, func() bool {
		code, ready = httpGet(t, base+"/readyz")
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "/readyz never 200; last answer %q", ready)
	require.True(t, strings.HasPrefix(ready, "ready: epoch 1, 1 members"), ready)

	code, body = httpGet(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`homelock_available{node="n1"} 1`,
		`homelock_epoch{node="n1"} 1`,
		`homelock_epoch_members{node="n1"} 1`,
		"# TYPE homelock_admissions_total counter",
		"# TYPE homelock_epoch_liveness_seconds gauge",
		"# TYPE go_goroutines gauge",
		"# TYPE process_resident_memory_bytes gauge",
	} {
		require.Contains(t, body, want)
	}
	code, _ = httpGet(t, base+"/nothing")
	require.Equal(t, http.StatusNotFound, code)

	conn, err := grpc.NewClient(n.api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	hc := grpc_health_v1.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", "homelock.client.v1.Client"} {
		require.Eventually(t, func() bool {
			r, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: svc})
			return err == nil && r.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
		}, 10*time.Second, 50*time.Millisecond, "gRPC health of %q", svc)
	}

	// status --json: snake_case, units in names, the store ID as in the log.
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"status", "--node", n.api, "--json"}, &out, &errOut), errOut.String())
	var raw map[string]map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &raw))
	require.Contains(t, raw["status"], "live_for_ms")
	require.Contains(t, raw["stats"], "held_delegations")
	storeID, _ := raw["status"]["store_id"].(string)
	require.Regexp(t, `^[0-9a-f]{16}$`, storeID)
	require.Contains(t, n.stderr.String(), "store="+storeID)
}

// Each log line names one component and one node, in either format, and
// Pebble's routine lines are not at info level.
func TestNodeLogKeysOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var n *runningNode
			t.Run("node", func(t *testing.T) { n = startNode(t, "--log-format", format) })
			lines := strings.Split(strings.TrimSpace(n.stderr.String()), "\n")
			require.Greater(t, len(lines), 2, n.stderr.String())
			for _, l := range lines {
				if format == "json" {
					var m map[string]any
					require.NoError(t, json.Unmarshal([]byte(l), &m), l)
					require.Equal(t, "n1", m["node"], l)
					require.NotEmpty(t, m["component"], l)
					require.NotEqual(t, "pebble", m["subsystem"], "pebble at info: %s", l)
				}
				require.Equal(t, 1, strings.Count(l, "component"), l)
				require.Equal(t, 1, strings.Count(l, `node=`)+strings.Count(l, `"node":`), l)
				require.NotContains(t, l, "subsystem=pebble", "pebble at info: %s", l)
			}
		})
	}
}

// A node left on a step of turning gossip encryption on or off says so in
// its log (it takes plaintext gossip from anyone who can reach its port),
// and homelock status says which step each node is on.
func TestNodeGossipEncryptionShown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	const warning = "gossip takes plaintext"
	for _, tc := range []struct {
		flags  []string
		warns  bool
		status string
	}{
		{nil, false, "gossip encryption: off\n"},
		{[]string{"--gossip-key", "0123456789abcdef"}, false, "gossip encryption: on\n"},
		{[]string{"--gossip-key", "0123456789abcdef", "--gossip-plaintext", "accept"}, true, "gossip encryption: on, plaintext accepted"},
		{[]string{"--gossip-key", "0123456789abcdef", "--gossip-plaintext", "send"}, true, "gossip encryption: plaintext sent, encrypted accepted"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			var n *runningNode
			var stdout, stderr lockedBuffer
			t.Run("node", func(t *testing.T) {
				n = startNode(t, tc.flags...)
				require.Equal(t, 0, runStatus([]string{"--node", n.api}, &stdout, &stderr), stderr.String())
			})
			require.Equal(t, tc.warns, strings.Contains(n.stderr.String(), warning), n.stderr.String())
			require.Contains(t, stdout.String(), tc.status)
		})
	}
}

// Non-loopback client API addresses without TLS or authentication are
// warned about; loopback ones are not.
func TestAPIServerWarnings(t *testing.T) {
	lo := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7950}
	wide := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 7950}
	require.Empty(t, (&apiServerFlags{}).warnings(lo))
	w := (&apiServerFlags{}).warnings(wide)
	require.Len(t, w, 2)
	require.Contains(t, w[0], "no TLS")
	require.Contains(t, w[1], "authenticates nobody")
	require.Len(t, (&apiServerFlags{cert: "c", key: "k"}).warnings(wide), 1)
	require.Empty(t, (&apiServerFlags{cert: "c", key: "k", tokenFile: "t"}).warnings(wide))
	require.Empty(t, (&apiServerFlags{cert: "c", key: "k", clientCA: "ca"}).warnings(wide))
}

// testPKI is a CA made in the test, and certificates it issues for
// 127.0.0.1, written as PEM files into dir.
type testPKI struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), cert: cert, key: key}
	p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *testPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
	return path
}

func (p *testPKI) caFile() string { return filepath.Join(p.dir, "ca.pem") }

// issue writes name.pem and name.key, valid for 127.0.0.1 as server and
// client, and returns their paths.
func (p *testPKI) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", kder)
}

// statusOf runs `homelock status` with args and returns its exit status and
// stderr.
func statusOf(t *testing.T, args ...string) (int, string) {
	var out, errOut bytes.Buffer
	code := run(append([]string{"status", "--timeout", "10s"}, args...), &out, &errOut)
	if code != 0 {
		t.Logf("status %q: %s", args, errOut.String())
	}
	return code, errOut.String()
}

// A client API with TLS and a bearer token: status and lock work with the
// CA and the token; a missing or wrong token, a plaintext client and a
// client that does not trust the node's CA are refused, each saying why.
func TestAPITLSAndToken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	pki := newTestPKI(t, "api-ca")
	cert, key := pki.issue(t, "node")
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret-token\n"), 0o600))
	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-token"), 0o600))
	n := startNode(t, "--api-tls-cert", cert, "--api-tls-key", key, "--api-token-file", token)

	code, errOut := statusOf(t, "--node", n.api, "--tls-ca", pki.caFile(), "--token-file", token)
	require.Equal(t, 0, code, errOut)
	var out, lockErr bytes.Buffer
	require.Equal(t, 0, run([]string{"lock", "tls-key", "--node", n.api, "--tls-ca", pki.caFile(), "--token-file", token,
		"--wait", "10s", "--", "true"}, &out, &lockErr), lockErr.String())

	// The environment works as the flags do.
	t.Setenv("HOMELOCK_NODE", n.api)
	t.Setenv("HOMELOCK_TLS_CA", pki.caFile())
	t.Setenv("HOMELOCK_TOKEN_FILE", token)
	code, errOut = statusOf(t)
	require.Equal(t, 0, code, errOut)

	code, errOut = statusOf(t, "--token-file", "")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no bearer token")
	require.Contains(t, errOut, "Unauthenticated")
	code, errOut = statusOf(t, "--token-file", wrong)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "wrong bearer token")
	lockErr.Reset()
	require.Equal(t, 1, run([]string{"lock", "tls-key", "--token-file", wrong, "--", "true"}, &out, &lockErr))
	require.Contains(t, lockErr.String(), "wrong bearer token")

	other := newTestPKI(t, "other-ca")
	code, errOut = statusOf(t, "--tls-ca", other.caFile())
	require.Equal(t, exitNoNode, code)
	require.Contains(t, errOut, "certificate signed by unknown authority")
	code, errOut = statusOf(t, "--tls-ca", "")
	require.Equal(t, exitNoNode, code)
	require.Contains(t, errOut, "no connection")
}

// A client API with mutual TLS: a client with a certificate from the client
// CA gets in; one without a certificate, or with one from another CA, is
// refused at the handshake.
func TestAPIMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	pki := newTestPKI(t, "api-ca")
	cert, key := pki.issue(t, "node")
	clientCert, clientKey := pki.issue(t, "client")
	n := startNode(t, "--api-tls-cert", cert, "--api-tls-key", key, "--api-client-ca", pki.caFile())

	code, errOut := statusOf(t, "--node", n.api, "--tls-ca", pki.caFile(), "--tls-cert", clientCert, "--tls-key", clientKey)
	require.Equal(t, 0, code, errOut)

	code, errOut = statusOf(t, "--node", n.api, "--tls-ca", pki.caFile())
	require.Equal(t, exitNoNode, code)
	require.Contains(t, errOut, "give --tls-cert and --tls-key")

	other := newTestPKI(t, "other-ca")
	oc, ok := other.issue(t, "intruder")
	code, errOut = statusOf(t, "--node", n.api, "--tls-ca", pki.caFile(), "--tls-cert", oc, "--tls-key", ok)
	require.Equal(t, exitNoNode, code)
	require.Contains(t, errOut, "the node may not accept this client certificate")
}

// A node stopped (SIGTERM's path) while it still waits to bootstrap exits 0
// and says so in its log format: the stop was asked for.
func TestNodeStoppedBeforeJoining(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node (-short)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	// n2 never starts: n1 waits for it in gossip until stopped.
	args := []string{"--id", "n1", "--cluster", "cmdtest", "--data-dir", filepath.Join(t.TempDir(), "n1"),
		"--bootstrap", "--initial", "n1,n2=" + freePort(t), "--grpc-addr", "127.0.0.1:0", "--gossip-addr", freePort(t),
		"--api-addr", "127.0.0.1:0", "--log-format", "json"}
	exited := make(chan int, 1)
	go func() { exited <- serveNode(ctx, args, stdout, stderr) }()
	for !strings.Contains(stdout.String(), "client API on") {
		select {
		case code := <-exited:
			t.Fatalf("exited with %d before serving:\n%s", code, stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-exited:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("did not stop:\n%s", stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "every line is JSON: %s", l)
	}
	require.Contains(t, stderr.String(), "stopped before the node joined its cluster")
}

// A node that cannot start says why in its log format: with --log-format
// json the failure is one more JSON line, not a plain one.
func TestNodeFailureInLogFormat(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	args := []string{"--id", "n1", "--cluster", "cmdtest", "--data-dir", filepath.Join(t.TempDir(), "n1"),
		"--bootstrap", "--initial", "n1", "--grpc-addr", "127.0.0.1:0", "--gossip-addr", freePort(t),
		"--api-addr", busy.Addr().String()}
	for _, format := range []string{"text", "json"} {
		var stdout, stderr lockedBuffer
		code := serveNode(context.Background(), append(args, "--log-format", format), &stdout, &stderr)
		require.Equal(t, 1, code, stderr.String())
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		if format == "text" {
			require.True(t, strings.HasPrefix(last, "homelock node: client API (--api-addr): "), last)
			continue
		}
		for _, l := range lines {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), "every line is JSON: %s", l)
		}
		require.Contains(t, last, `"err":"client API (--api-addr): `)
	}
}

// A node started without a flag it needs says which flag, by its name.
func TestNodeNamesMissingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", t.TempDir()}, "homelock node: --id is required"},
		{[]string{"--id", "n1"}, "homelock node: --data-dir is required"},
		{[]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap"}, "homelock node: --bootstrap needs --initial"},
		{[]string{"--id", "n1", "--data-dir", t.TempDir(), "--gossip-key", "0123456789abcdef", "--gossip-accept-keys", "fedcba9876543210,short"},
			"--gossip-accept-keys: want 16, 24 or 32 bytes (or 48 or 64 hex digits), got 5 characters"},
		{[]string{"--id", "n1", "--data-dir", t.TempDir(), "--gossip-key", "0123456789abcdef", "--gossip-plaintext", "off"},
			`--gossip-plaintext: transport: invalid config: plaintext mode "off": want refuse, accept or send`},
		{[]string{"--id", "n1", "--data-dir", t.TempDir(), "--gossip-plaintext", "send"},
			"GossipPlaintext send needs a GossipKey"},
	} {
		var stdout, stderr lockedBuffer
		require.Equal(t, 2, serveNode(context.Background(), tc.args, &stdout, &stderr), stderr.String())
		require.Contains(t, stderr.String(), tc.want)
	}
}
