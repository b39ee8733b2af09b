package homelock

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/leakcheck"
	"github.com/homelock/homelock/internal/loopback"
	"github.com/homelock/homelock/transport"
)

// Every test closes its nodes; leakcheck then shows Close left no goroutine
// behind (memberlist's in-flight probes aside, which it waits for). A step applied inside another panics here (a running node logs
// it).
func TestMain(m *testing.M) {
	panicOnNestedStep = true
	leakcheck.VerifyTestMain(m)
}

// freeAddr returns a loopback host:port that was free a moment ago (for
// gossip addresses that bootstrapping nodes must know in advance).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := loopback.Addr()
	require.NoError(t, err)
	return addr
}

// testConfig is a node on loopback with short timings: liveness in 600ms,
// leases of 200ms, failure detection within a second.
func testConfig(t testing.TB, id string) Config {
	c := DefaultConfig()
	c.NodeID = id
	c.ClusterID = "test"
	c.DataDir = t.TempDir()
	c.GRPCAddr = "127.0.0.1:0"
	c.GossipAddr = freeAddr(t)
	c.GossipTimings = transport.FastTimings()
	c.EpochLease = 600 * time.Millisecond
	c.MaxLease = 200 * time.Millisecond
	c.MinUseful = 20 * time.Millisecond
	c.Skew = 50 * time.Millisecond
	c.RetryInterval = 20 * time.Millisecond
	c.DownAfter = 500 * time.Millisecond
	c.DefaultWait = 5 * time.Second
	if os.Getenv("HOMELOCK_TEST_LOG") != "" {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	}
	return c
}

// longLeases gives a cluster's delegations leases that outlast a starved
// timer goroutine: tests that keep both cores busy (under the race
// detector, on a loaded machine) and check exclusion, not lease timing,
// would otherwise see a section's lease run out while its renewal waited
// for a core, which is the protocol doing its job.
func longLeases(c *Config) {
	c.MaxLease = 2 * time.Second
	c.EpochLease = 3 * time.Second
	c.Skew = 150 * time.Millisecond
}

func testKeyRing(t testing.TB) *fence.KeyRing {
	r := fence.NewKeyRing()
	require.NoError(t, r.Add("k1", []byte("0123456789abcdef0123456789abcdef")))
	return r
}

// cluster is n nodes bootstrapped together on loopback.
type cluster struct {
	t     testing.TB
	cfgs  []Config
	nodes []*Node
}

func newCluster(t testing.TB, size int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, cfgs: bootstrapConfigs(t, size, tweak)}
	c.nodes = make([]*Node, size)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i := range size {
		wg.Go(func() { c.nodes[i], errs[i] = Open(ctx, c.cfgs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "open %s", c.cfgs[i].NodeID)
	}
	t.Cleanup(c.closeAll)
	return c
}

// bootstrapConfigs are the configs of n1..nN starting a cluster together:
// every one bootstraps the same initial members and joins n1's gossip.
func bootstrapConfigs(t testing.TB, size int, tweak func(*Config)) []Config {
	var ids []string
	for i := range size {
		ids = append(ids, fmt.Sprintf("n%d", i+1))
	}
	ring := testKeyRing(t)
	var cfgs []Config
	for i, id := range ids {
		cfg := testConfig(t, id)
		cfg.Bootstrap = true
		cfg.InitialMembers = ids
		cfg.KeyRing = ring
		if i > 0 {
			cfg.Join = []string{cfgs[0].GossipAddr}
		}
		if tweak != nil {
			tweak(&cfg)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs
}

// closeAll kills every node: the tests that check a graceful Close call it
// themselves.
func (c *cluster) closeAll() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Go(func() { _ = n.Close(killed()) })
		}
	}
	wg.Wait()
}

// killed is a context already done: Close given it is a kill (no drain, no
// release, no handoff).
func killed() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// readyNode is a one-node cluster's node, available to grant (closed when
// the test ends).
func readyNode(t testing.TB) *Node {
	t.Helper()
	c := newCluster(t, 1, nil)
	c.waitAvailable()
	return c.nodes[0]
}

// waitAvailable waits until every open node can grant (liveness held).
func (c *cluster) waitAvailable() {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		for !n.Status().Available {
			if time.Now().After(deadline) {
				c.t.Fatalf("node %s not available: %+v", n.ID(), n.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// homeOf returns the index of key's home in the current epoch of node 0's view.
func (c *cluster) homeOf(key string) int {
	c.t.Helper()
	n := c.nodes[0]
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, m := range c.nodes {
		if m != nil && m.core.Home().IsHome(key) {
			_ = i
		}
	}
	for i, m := range c.nodes {
		if m == nil {
			continue
		}
		if m != n {
			m.mu.Lock()
		}
		is := m.core.Home().IsHome(key)
		if m != n {
			m.mu.Unlock()
		}
		if is {
			return i
		}
	}
	return -1
}

// keyHomedAt finds a key whose home is node i (and not another).
func (c *cluster) keyHomedAt(i int, prefix string) string {
	for k := 0; ; k++ {
		key := fmt.Sprintf("%s-%d", prefix, k)
		if c.homeOf(key) == i {
			return key
		}
	}
}
