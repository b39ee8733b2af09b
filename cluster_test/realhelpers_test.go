package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/leakcheck"
	"github.com/homelock/homelock/internal/loopback"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// The real-cluster tests close every node and KV they open; leakcheck then shows
// that nothing they started outlives Close. (The simulator's tests start no
// goroutine.)
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// Timings of the real-cluster tests: liveness in 600ms, leases of 250ms,
// failure detection within about a second, so each test runs in seconds.
// Under the race detector each is raceScale times longer (race_test.go).
const (
	rcEpochLease = raceScale * 600 * time.Millisecond
	rcMaxLease   = raceScale * 250 * time.Millisecond
	rcSkew       = raceScale * 50 * time.Millisecond
	rcRetry      = 20 * time.Millisecond
	rcDownAfter  = raceScale * 500 * time.Millisecond
)

// rnode is one node of a real cluster and the KV it runs beside.
type rnode struct {
	cfg  homelock.Config
	node *homelock.Node
	kv   *KV
}

func (r *rnode) ID() string { return r.cfg.NodeID }

// rcluster is real nodes in this process: Pebble in t.TempDir(), memberlist
// on loopback, and gRPC on loopback or (mem set) the in-memory transport,
// whose Pause and Partition the fault tests use. Each node has a KV on a
// shared KVNet.
type rcluster struct {
	t     testing.TB
	o     rcOptions
	ring  *fence.KeyRing
	kvnet *KVNet
	mem   *transport.Network // nil: gRPC
	nodes []*rnode

	mu sync.Mutex // guards nodes against concurrent restarts in cleanup
}

type rcOptions struct {
	// inmem: the in-memory transport (Pause, Partition) instead of gRPC.
	inmem bool
	// replDelay holds every replicated write this long.
	replDelay time.Duration
	// noWaitFresh leaves Config.WaitFresh unset: the negative control of
	// successor freshness.
	noWaitFresh bool
	// tweak, if set, changes each node's config last (after its KV hooks).
	tweak func(*homelock.Config)
}

func freeLoopback(t testing.TB) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func rcKeyRing(t testing.TB) *fence.KeyRing {
	r := fence.NewKeyRing()
	if err := r.Add("k1", []byte("cluster-test-key-0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	return r
}

// rcConfig is one node's config with the short timings.
func (c *rcluster) rcConfig(id string) homelock.Config {
	cfg := homelock.DefaultConfig()
	cfg.NodeID = id
	cfg.ClusterID = "clustertest"
	cfg.DataDir = filepath.Join(c.t.TempDir(), "node-"+id)
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.GossipAddr = freeLoopback(c.t)
	cfg.GossipTimings = transport.FastTimings()
	cfg.EpochLease = rcEpochLease
	cfg.MaxLease = rcMaxLease
	cfg.MinUseful = 20 * time.Millisecond
	cfg.Skew = rcSkew
	cfg.RetryInterval = rcRetry
	cfg.DownAfter = rcDownAfter
	cfg.DefaultWait = 5 * time.Second
	cfg.KeyRing = c.ring
	if os.Getenv("HOMELOCK_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	}
	if c.mem != nil {
		mem := c.mem
		cfg.Transport = func(self msg.Member, h transport.Handler) (transport.Transport, error) {
			ep, err := mem.Endpoint(self, h)
			if err != nil {
				return nil, err
			}
			return ep, nil
		}
	}
	return cfg
}

// newRCluster bootstraps size nodes together and waits until every one can
// grant. Cleanup closes every node and KV.
func newRCluster(t testing.TB, size int, o rcOptions) *rcluster {
	t.Helper()
	c := &rcluster{t: t, o: o, ring: rcKeyRing(t), kvnet: NewKVNet()}
	c.kvnet.SetDelay(o.replDelay)
	if o.inmem {
		c.mem = transport.NewNetwork(transport.NetworkConfig{Seed: 1})
	}
	ids := make([]string, size)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	for i, id := range ids {
		cfg := c.rcConfig(id)
		cfg.Bootstrap = true
		cfg.InitialMembers = ids
		if i > 0 {
			cfg.Join = []string{c.nodes[0].cfg.GossipAddr}
		}
		r := &rnode{cfg: cfg, kv: c.openKV(cfg)}
		c.hook(&r.cfg, r.kv)
		c.nodes = append(c.nodes, r)
	}
	t.Cleanup(c.closeAll)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i, r := range c.nodes {
		wg.Go(func() {
			r.node, errs[i] = homelock.Open(ctx, r.cfg)
			if errs[i] == nil {
				r.kv.Attach(r.node)
			}
		})
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %s: %v", ids[i], err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
	c.waitAvailable(10 * time.Second)
	return c
}

// openKV opens the KV beside the node of cfg; its Guard verifies grants
// with the node's key ring.
func (c *rcluster) openKV(cfg homelock.Config) *KV {
	c.t.Helper()
	kv, err := OpenKV(KVConfig{
		ID: cfg.NodeID, Dir: cfg.DataDir + "-kv", KeyRing: cfg.KeyRing, Domain: cfg.ClusterID,
		Operation: cfg.GrantOperation, Net: c.kvnet,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return kv
}

// hook wires cfg's store hooks to kv, then applies the test's tweak.
func (c *rcluster) hook(cfg *homelock.Config, kv *KV) {
	cfg.Barrier = kv.BarrierHook
	if !c.o.noWaitFresh {
		cfg.WaitFresh = kv.WaitFreshHook
	}
	if c.o.tweak != nil {
		c.o.tweak(cfg)
	}
}

// addNode starts a node that joins the running cluster through node 0's
// gossip address.
func (c *rcluster) addNode(ctx context.Context, id string, seed int) *rnode {
	c.t.Helper()
	cfg := c.rcConfig(id)
	cfg.Join = []string{c.nodes[seed].node.GossipAddr()}
	r := &rnode{cfg: cfg, kv: c.openKV(cfg)}
	c.hook(&r.cfg, r.kv)
	c.mu.Lock()
	c.nodes = append(c.nodes, r)
	c.mu.Unlock()
	n, err := homelock.Open(ctx, r.cfg)
	if err != nil {
		c.t.Fatalf("open %s: %v", id, err)
	}
	r.node = n
	r.kv.Attach(n)
	return r
}

// crash stops node i without a clean handoff: Close with a context that is
// already cancelled (a kill), so it waits for no critical section, sends
// nothing (no Release, no Leave) and stays a member of the epoch. Its KV
// stays attached unless dropKV, in which case the KV closes too (queued
// replication is lost).
func (c *rcluster) crash(i int, dropKV bool) {
	c.t.Helper()
	r := c.nodes[i]
	_ = r.node.Close(killed())
	if dropKV {
		_ = r.kv.Close()
	}
}

// killed is a context already done: Close given it is a kill.
func killed() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// reopen opens closed node i again on the same data directory and addresses
// and attaches its KV: after crash, a process crash and restart (the node is
// still a member of the epoch); after a clean Close, a node that left and
// comes back. It returns how long Open took.
func (c *rcluster) reopen(ctx context.Context, i int) time.Duration {
	c.t.Helper()
	r := c.nodes[i]
	cfg := r.cfg
	if c.mem == nil {
		cfg.GRPCAddr = r.node.GRPCAddr() // the same port, as a restarted process would
	}
	start := time.Now()
	n, err := homelock.Open(ctx, cfg)
	if err != nil {
		c.t.Fatalf("reopen %s: %v", r.ID(), err)
	}
	d := time.Since(start)
	c.mu.Lock()
	r.node = n
	c.mu.Unlock()
	r.kv.Attach(n)
	return d
}

// closeAll kills every node (a test that checks a graceful Close calls it
// itself), then closes the KVs.
func (c *rcluster) closeAll() {
	c.mu.Lock()
	nodes := append([]*rnode(nil), c.nodes...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range nodes {
		if r.node != nil {
			wg.Go(func() { _ = r.node.Close(killed()) })
		}
	}
	wg.Wait()
	for _, r := range nodes {
		_ = r.kv.Close()
	}
	if c.mem != nil {
		_ = c.mem.Close()
	}
}

// waitAvailable waits until every node that is open can grant.
func (c *rcluster) waitAvailable(d time.Duration) {
	c.t.Helper()
	waitFor(c.t, d, "every node available", func() bool {
		for _, r := range c.nodes {
			if r.node != nil && !r.node.Status().Available {
				return false
			}
		}
		return true
	})
}

// ring is the rendezvous ring of the epoch node i has learned.
func (c *rcluster) epochRing(i int) *epoch.Ring {
	st := c.nodes[i].node.Status()
	e := msg.Epoch{Number: st.Epoch}
	for _, m := range st.Members {
		e.Members = append(e.Members, msg.Member{ID: msg.NodeID(m.ID), Store: m.StoreID, Addr: m.Addr, Version: m.Version})
	}
	return epoch.NewRing(e)
}

// homeOf is the node ID of key's home in the epoch node i has learned.
func (c *rcluster) homeOf(i int, key string) string {
	m, _ := c.epochRing(i).Home(key)
	return string(m.ID)
}

// keyHomedAt is a key whose home, in node 0's view, is node id.
func (c *rcluster) keyHomedAt(id, prefix string) string {
	r := c.epochRing(0)
	for k := 0; ; k++ {
		key := fmt.Sprintf("%s-%d", prefix, k)
		if m, _ := r.Home(key); string(m.ID) == id {
			return key
		}
	}
}

// settle waits until every replicated write has been applied.
func (c *rcluster) settle(d time.Duration) {
	c.t.Helper()
	waitFor(c.t, d, "replication settled", c.kvnet.Settled)
}

// waitFor polls cond until it holds or d passes (then fails the test,
// with what each detail says).
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var more string
			for _, f := range detail {
				more += "; " + f()
			}
			t.Fatalf("timed out after %v waiting for %s%s", d, what, more)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dump logs every open node's view (epoch, liveness, availability) and its
// message counters, so that a failure explains itself.
func (c *rcluster) dump() {
	c.t.Helper()
	c.mu.Lock()
	nodes := append([]*rnode(nil), c.nodes...)
	c.mu.Unlock()
	for _, r := range nodes {
		if r.node == nil {
			continue
		}
		st, s := r.node.Status(), r.node.Stats()
		c.t.Logf("%s: epoch %d, %d members, live for %v, available %v (%s); held %d pending %d live %d waiting %d; dropped %d lost %d; by kind %v",
			r.ID(), st.Epoch, len(st.Members), st.LiveFor, st.Available, st.Reason, s.Held, s.Pending, s.Live, s.Waiting, s.Dropped, s.Lost, s.ByKind)
	}
}
