package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
	"github.com/homelock/homelock/transport"
)

// listFlag is a comma-separated list flag that may also be repeated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func runNode(args []string, stdout, stderr io.Writer) int {
	// SIGHUP too: a node run from a terminal that closes hands its keys
	// off, rather than dying as a crash would.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// From the first signal on, the default action is back: a second one
	// ends the process at once, as a crash would, even while its store is
	// still opening or its handoff lingers.
	context.AfterFunc(ctx, stop)
	return serveNode(ctx, args, stdout, stderr)
}

// serveNode runs a node until ctx ends, then closes it.
func serveNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: homelock node --id ID --data-dir DIR [--bootstrap --initial ID=GOSSIP,... | --join ADDRS] [flags]

Runs one homelock node until SIGINT, SIGTERM or SIGHUP, then closes it
cleanly: it releases the delegations it holds, leaves the epoch so that the
keys it is home for move (unless it is the last member or another one is
down), and answers their new homes for about --epoch-lease more before it
exits. A lock held through another node on one of those keys is handed to
the key's new home and goes on. A second signal ends it at once, as a
crash would: safe, but the keys it was still home for wait out their gate
(--epoch-lease + 250ms), and the locks on them end with their lease.

A rolling restart: SIGTERM one node, start it again, and go on to the next
once "homelock status" shows every member alive (a node that sees a member
down keeps its keys when it stops, so locks on them end).

Every node must run the same --epoch-lease and --max-lease: a node that
sees a peer run others in gossip fails every cluster lock closed, saying
who runs what, until they agree again. Changing them is a restart of
every node; locks fail until the last one runs the new values.

The first start of a cluster: every initial node gets --bootstrap and the
same --initial list, each member as ID=GOSSIP-ADDR, for example
  --bootstrap --initial n1=127.0.0.1:7947,n2=127.0.0.1:7957,n3=127.0.0.1:7967
(plain IDs work too when --join gives the others' gossip addresses). A new
node joins a running cluster with --join GOSSIP-ADDRS. A restarted node
needs neither: it rejoins gossip at the addresses it kept of its epoch's
members, and the members that stayed up keep rejoining it (if it had left
or was removed, it asks to join again once --epoch-lease has passed).

Until it is a member the node answers "homelock status" with where it
stands ("bootstrapping: waiting for n2, n3 in gossip", "joining: asked n1",
"restart gate: 4.1s left ..."). A node whose ID is already held by another
live node with another data directory is refused and exits (duplicate node
ID); the live node keeps its membership.

The client API (--api-addr) is plaintext and open to anyone who reaches it
unless it has TLS (--api-tls-cert, --api-tls-key) and authenticates its
clients, by certificate (--api-client-ca: mutual TLS) or by a bearer token
(--api-token-file). It also serves the gRPC health service: the empty
service name reports that the process serves, "homelock.client.v1.Client"
that it is ready. --metrics-addr serves HTTP: /metrics (Prometheus),
/healthz (the process serves) and /readyz (200 once the node is a member of
an agreed epoch, holds epoch liveness and can grant locks; 503 and the
reason otherwise).

Flags:
`)
		fs.PrintDefaults()
	}
	d := homelock.DefaultConfig()
	id := fs.String("id", "", "this node's ID, stable across restarts (required)")
	cluster := fs.String("cluster", "homelock", "cluster ID (lock domain)")
	dataDir := fs.String("data-dir", "", "directory of the node's store (required)")
	grpcAddr := fs.String("grpc-addr", d.GRPCAddr, "host:port the peer transport listens on")
	advertise := fs.String("advertise-addr", "", "host:port peers dial, if not --grpc-addr; they let this node in only once it answers there as itself")
	gossipAddr := fs.String("gossip-addr", d.GossipAddr, "host:port memberlist binds")
	gossipAdvertise := fs.String("gossip-advertise", "", "host:port peers gossip with, if not --gossip-addr")
	var api apiServerFlags
	api.register(fs)
	metricsAddr := fs.String("metrics-addr", "", "host:port of the HTTP server for /metrics, /healthz and /readyz (empty: none)")
	var logf logFlags
	logf.register(fs)
	bootstrap := fs.Bool("bootstrap", false, "start a new cluster of --initial members")
	var initial, join listFlag
	fs.Var(&initial, "initial", "members of the first epoch (with --bootstrap), comma-separated ID=GOSSIP-ADDR (or IDs with --join)")
	fs.Var(&join, "join", "gossip addresses of running nodes, comma-separated")
	tlsCert := fs.String("tls-cert", "", "PEM certificate for the peer transport")
	tlsKey := fs.String("tls-key", "", "PEM key for --tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA that verifies peers (with --tls-cert: mutual TLS)")
	gossipKey := fs.String("gossip-key", "", "gossip encryption key: 16, 24 or 32 bytes (or 48 or 64 hex digits)")
	gossipPlaintext := fs.String("gossip-plaintext", "refuse", "what a node with --gossip-key does with unencrypted gossip: refuse, accept (still encrypts), or send (sends it, takes either); the two last are steps for turning encryption on or off across a running cluster (docs/operations.md)")
	gossipAccept := fs.String("gossip-accept-keys", "", "further gossip keys, comma-separated, that other nodes may encrypt with while the key changes (docs/operations.md); needs --gossip-key")
	keyRing := fs.String("key-ring", "", "key ring file that signs grants (see fence.ParseKeyRing)")
	epochLease := fs.Duration("epoch-lease", d.EpochLease, "epoch liveness per renewal round")
	maxLease := fs.Duration("max-lease", d.MaxLease, "longest delegation lease")
	downAfter := fs.Duration("down-after", d.DownAfter, "how long a member may be down before it is removed")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "homelock node: unexpected arguments %q\n", fs.Args())
		return 2
	}
	base, err := logf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "homelock node: %v\n", err)
		return 2
	}
	log := base.With("component", "command", "node", *id)
	// fail reports why the node stops: a plain line a person reads, or a
	// JSON object where every stderr line is one.
	fail := func(what string, err error) {
		if logf.format == "json" {
			log.Error(what, "err", err)
			return
		}
		fmt.Fprintf(stderr, "homelock node: %v\n", err)
	}
	srvOpts, err := api.serverOptions()
	if err != nil {
		fail("bad client API flags", err)
		return 2
	}

	// The two flags every node needs are named as flags, not as the
	// Config fields Validate would name.
	for _, f := range []struct{ flag, value string }{{"--id", *id}, {"--data-dir", *dataDir}} {
		if f.value == "" {
			fail("missing flag", fmt.Errorf("%s is required (homelock node --help)", f.flag))
			return 2
		}
	}
	if *bootstrap && len(initial) == 0 {
		fail("missing flag", fmt.Errorf("--bootstrap needs --initial: every initial member as ID=GOSSIP-ADDR, the same list on each (homelock node --help)"))
		return 2
	}
	cfg := d
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = *id, *cluster, *dataDir
	cfg.GRPCAddr, cfg.AdvertiseAddr = *grpcAddr, *advertise
	cfg.GossipAddr, cfg.GossipAdvertise = *gossipAddr, *gossipAdvertise
	ids, seeds, err := parseInitial(initial, *id)
	if err != nil {
		fail("bad --initial", fmt.Errorf("--initial: %w", err))
		return 2
	}
	cfg.Bootstrap, cfg.InitialMembers, cfg.Join = *bootstrap, ids, append(seeds, join...)
	cfg.KeyRingFile = *keyRing
	cfg.EpochLease, cfg.MaxLease, cfg.DownAfter = *epochLease, *maxLease, *downAfter
	cfg.Logger = base
	if *gossipKey != "" {
		key, err := parseKey(*gossipKey)
		if err != nil {
			fail("bad --gossip-key", fmt.Errorf("--gossip-key: %w", err))
			return 2
		}
		cfg.GossipKey = key
	}
	if *gossipAccept != "" {
		for s := range strings.SplitSeq(*gossipAccept, ",") {
			key, err := parseKey(s)
			if err != nil {
				fail("bad --gossip-accept-keys", fmt.Errorf("--gossip-accept-keys: %w", err))
				return 2
			}
			cfg.GossipAcceptKeys = append(cfg.GossipAcceptKeys, key)
		}
	}
	if cfg.GossipPlaintext, err = transport.ParsePlaintext(*gossipPlaintext); err != nil {
		fail("bad --gossip-plaintext", fmt.Errorf("--gossip-plaintext: %w", err))
		return 2
	}
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		cfg.TLS = &transport.TLSFiles{CertFile: *tlsCert, KeyFile: *tlsKey, CAFile: *tlsCA}
		if *tlsCA != "" && *tlsCert != "" {
			cfg.TLS.ClientCertFile, cfg.TLS.ClientKeyFile = *tlsCert, *tlsKey
		}
	}
	if err := cfg.Validate(); err != nil {
		fail("bad configuration", err)
		return 2
	}

	// Both listeners open before the store does, so that a port in use
	// fails the start before anything is created.
	lis, err := net.Listen("tcp", api.addr)
	if err != nil {
		fail("client API listener failed", fmt.Errorf("client API (--api-addr): %w", err))
		return 1
	}
	defer lis.Close()
	var mlis net.Listener
	if *metricsAddr != "" {
		if mlis, err = net.Listen("tcp", *metricsAddr); err != nil {
			fail("metrics listener failed", fmt.Errorf("metrics: %w", err))
			return 1
		}
		defer mlis.Close()
	}
	for _, w := range api.warnings(lis.Addr()) {
		log.Warn(w)
	}
	// The client API and the metrics are served from the moment the node
	// answers Status, before Open waits for bootstrap or join: "status" and
	// /readyz then say where the node stands instead of timing out.
	srv := grpc.NewServer(srvOpts...)
	hs := health.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, hs)
	var served sync.WaitGroup
	stopHealth := make(chan struct{})
	metricsCtx, stopMetrics := context.WithCancel(context.Background())
	defer stopMetrics()
	started := false // Started runs on Open's goroutine, before it returns
	var lockAPI *clientapi.Server
	cfg.Started = func(n *homelock.Node) {
		started = true
		lockAPI = clientapi.NewServer(n)
		clientapi.RegisterClientServer(srv, lockAPI)
		served.Go(func() { watchHealth(n, hs, stopHealth) })
		served.Go(func() { _ = srv.Serve(lis) })
		where := ""
		if mlis != nil {
			served.Go(func() { serveMetrics(metricsCtx, mlis, n, log) })
			where = ", metrics on " + mlis.Addr().String()
		}
		fmt.Fprintf(stdout, "homelock node %s: peers on %s, gossip on %s, client API on %s%s\n", *id, n.GRPCAddr(), n.GossipAddr(), lis.Addr(), where)
	}
	// stopServing ends the client API, health and metrics at once, for a
	// node that failed to open or stopped for good.
	stopServing := func() {
		close(stopHealth)
		srv.Stop()
		stopMetrics()
		served.Wait()
	}
	n, err := homelock.Open(ctx, cfg)
	if err != nil {
		if started {
			stopServing()
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// SIGTERM or SIGINT before the node bootstrapped or joined: the
			// stop asked for, not a failure (nothing was held or homed).
			log.Info("stopped before the node joined its cluster", "err", err)
			return 0
		}
		fail("homelock node failed", err)
		return 1
	}
	if err := untilStopped(ctx, n); err != nil {
		// The store refused a write: the node has stopped for good and left
		// gossip. Exiting lets a supervisor start it again.
		_ = n.Close(killedContext())
		stopServing()
		fail("homelock node stopped", fmt.Errorf("%w (the node left its cluster; start it again once its data directory is fixed)", err))
		return 1
	}
	log.Info("shutting down (a second signal stops at once)")
	close(stopHealth)
	hs.Shutdown()
	// Stop serving first. Lockers still waiting fail; each `homelock lock`
	// holding a lock through this node is told to stop its command and
	// keeps the lock until the command has exited (its --kill-after, 5s by
	// default), so the next holder never starts while it runs. Past
	// drainWait the streams are cut and their handles unlock.
	lockAPI.Stop()
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainWait(lockAPI.DrainWait())):
		srv.Stop()
	}
	// The handoff takes an agreement and the recalls of its delegations
	// (MaxLease at worst), then lingers EpochLease + Skew.
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+cfg.MaxLease+cfg.EpochLease+cfg.Skew)
	defer cancel()
	err = n.Close(cctx)
	// The metrics server answers until the node is closed: /readyz says
	// "not ready: closed" during the handoff rather than refusing.
	stopMetrics()
	served.Wait()
	if err != nil {
		fail("homelock node: close failed", fmt.Errorf("close: %w", err))
		return 1
	}
	return 0
}

// parseInitial splits --initial into node IDs and the gossip addresses of
// the other members (ID=ADDR; a plain ID has none).
func parseInitial(items []string, self string) (ids, seeds []string, err error) {
	for _, it := range items {
		id, addr, hasAddr := strings.Cut(it, "=")
		if id == "" || (hasAddr && addr == "") {
			return nil, nil, fmt.Errorf("%q: want ID or ID=HOST:PORT", it)
		}
		if hasAddr {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return nil, nil, fmt.Errorf("%q: %v", it, err)
			}
			if id != self {
				seeds = append(seeds, addr)
			}
		}
		ids = append(ids, id)
	}
	return ids, seeds, nil
}

// parseKey accepts a raw key of 16, 24 or 32 bytes or its hex form.
func parseKey(s string) ([]byte, error) {
	switch len(s) {
	case 16, 24, 32:
		return []byte(s), nil
	case 32 * 2, 24 * 2:
		var b []byte
		if _, err := fmt.Sscanf(s, "%x", &b); err == nil && (len(b) == 24 || len(b) == 32) {
			return b, nil
		}
	}
	return nil, fmt.Errorf("want 16, 24 or 32 bytes (or 48 or 64 hex digits), got %d characters", len(s))
}

// lockDrainWait is how long a node shutting down waits at least for the
// commands of `homelock lock` holding locks through it to exit: the lock
// command's default --kill-after (5s), its wait for the command's output to
// close (1s), and room for a loaded machine. A lock command with a longer
// --kill-after asks for more (drainWait), up to maxLockDrainWait.
const (
	lockDrainWait    = 10 * time.Second
	maxLockDrainWait = 10 * time.Minute
)

// drainWait is how long to wait for the lock streams to end, given the
// longest drain time a holder's client asked for.
func drainWait(asked time.Duration) time.Duration {
	return min(max(lockDrainWait, asked+time.Second), maxLockDrainWait)
}

// untilStopped waits until ctx ends (nil) or n stops for good on its own
// (its store failed: n.Err).
func untilStopped(ctx context.Context, n interface{ Err() error }) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if err := n.Err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// killedContext is a context already done: Close given it is a kill.
func killedContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
