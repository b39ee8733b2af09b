package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/homelock/homelock"
	clustertest "github.com/homelock/homelock/cluster_test"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/loopback"
	"github.com/homelock/homelock/transport"
)

// cluster is the harness's nodes, each with the replicated store beside it.
type cluster struct {
	dir   string
	keys  *fence.KeyRing
	net   *clustertest.KVNet
	cfgs  []homelock.Config
	nodes []*homelock.Node
	kvs   []*clustertest.KV
	// settled is when the cluster last had a usable epoch: when it became
	// available, or when a restarted node first granted (that epoch was
	// learned no later).
	settled time.Time
}

const operation = "harness"

func nodeConfig(root, id string, ring *fence.KeyRing) (homelock.Config, error) {
	gossip, err := loopback.Addr()
	if err != nil {
		return homelock.Config{}, err
	}
	c := homelock.DefaultConfig()
	c.NodeID = id
	c.ClusterID = "harness"
	c.DataDir = filepath.Join(root, id, "homelock")
	c.GRPCAddr = "127.0.0.1:0"
	c.GossipAddr = gossip
	c.GossipTimings = transport.LocalTimings()
	c.KeyRing = ring
	c.GrantOperation = operation
	c.DownAfter = 2 * time.Second
	c.MaxLease = 5 * time.Second
	c.EpochLease = 8 * time.Second
	c.DefaultWait = 10 * time.Second
	return c, nil
}

// startCluster opens size nodes with their stores under root, and waits until
// every node is available. configure, if set, is applied to each node's
// config (restarts keep it). On an error it leaves nothing open and root
// gone.
func startCluster(ctx context.Context, root string, size int, configure func(*homelock.Config)) (*cluster, error) {
	c := &cluster{dir: root, keys: fence.NewKeyRing(), net: clustertest.NewKVNet()}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if err := c.keys.Add("harness-1", secret); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	var ids []string
	for i := range size {
		ids = append(ids, fmt.Sprintf("n%d", i+1))
	}
	for i, id := range ids {
		cfg, err := nodeConfig(root, id, c.keys)
		if err != nil {
			c.close()
			return nil, err
		}
		cfg.Bootstrap, cfg.InitialMembers = true, ids
		if i > 0 {
			cfg.Join = []string{c.cfgs[0].GossipAddr}
		}
		if configure != nil {
			configure(&cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	c.nodes = make([]*homelock.Node, size)
	c.kvs = make([]*clustertest.KV, size)
	for i := range size {
		kv, err := c.openKV(i)
		if err != nil {
			c.close()
			return nil, err
		}
		c.kvs[i] = kv
		c.cfgs[i].Barrier, c.cfgs[i].WaitFresh = kv.BarrierHook, kv.WaitFreshHook
	}
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range size {
		wg.Go(func() { c.nodes[i], errs[i] = homelock.Open(ctx, c.cfgs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.close()
			return nil, fmt.Errorf("open %s: %w", ids[i], err)
		}
		c.kvs[i].Attach(c.nodes[i])
	}
	if err := c.waitAvailable(ctx); err != nil {
		c.close()
		return nil, err
	}
	c.settled = time.Now()
	return c, nil
}

func (c *cluster) openKV(i int) (*clustertest.KV, error) {
	return clustertest.OpenKV(clustertest.KVConfig{
		ID: c.cfgs[i].NodeID, Dir: filepath.Join(c.dir, c.cfgs[i].NodeID, "kv"),
		KeyRing: c.keys, Domain: c.cfgs[i].ClusterID, Operation: operation, Net: c.net,
		// Shadow mode: the Guards count what they would refuse (0 on a
		// correct run) instead of hiding a lock bug by refusing it; the
		// hot key's lost-update count sees any stale write that commits.
		GuardMode: fence.ModeShadow,
		// A store keeps receipts only while its writers may ask for them;
		// this one's never do once a write returns. Kept forever they grow
		// the store by about 110 bytes a write on every replica, and its
		// compactions with it, round after round.
		PruneEvery: time.Second,
	})
}

func (c *cluster) waitAvailable(ctx context.Context) error {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		for !n.Status().Available {
			if ctx.Err() != nil {
				return fmt.Errorf("node %s never became available: %s", n.ID(), n.Status().Reason)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// ring is the current epoch's key-to-home map, as node i sees it.
func (c *cluster) ring(i int) *epoch.Ring { return statusRing(c.nodes[i].Status()) }

// homeIndex is the index of key's home node in the current epoch, as node
// 0 sees it (-1 when it is none of c.nodes).
func (c *cluster) homeIndex(key string) int {
	h, _ := c.ring(0).Home(key)
	for i, n := range c.nodes {
		if n != nil && n.ID() == string(h.ID) {
			return i
		}
	}
	return -1
}

// keyHomedAt returns a fresh key (prefix-based) whose home is node want, or
// whose home is not node want when other is set; "" if none is found in
// keyTries (want is not a member of r, or its only one).
func (c *cluster) keyHomedAt(r *epoch.Ring, want string, other bool, prefix string, next *int) string {
	for range keyTries {
		*next++
		k := fmt.Sprintf("%s-%d", prefix, *next)
		h, _ := r.Home(k)
		if (string(h.ID) == want) != other {
			return k
		}
	}
	return ""
}

// keyTries bounds keyHomedAt: each try hits a given member's key about once
// in as many tries as there are members.
const keyTries = 10_000

// close kills every node: the whole cluster goes away with its data, so
// there is no one to hand keys off to, and a clean Close would linger
// EpochLease + Skew for drain queries nobody sends. Then it removes the
// cluster's directory. A second close does nothing.
func (c *cluster) close() {
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n != nil {
			wg.Go(func() { _ = n.Close(killed(context.Background())) })
			c.nodes[i] = nil
		}
	}
	wg.Wait()
	for i, kv := range c.kvs {
		if kv != nil {
			_ = kv.Close()
			c.kvs[i] = nil
		}
	}
	_ = os.RemoveAll(c.dir)
}

// settleStores waits, at most storeSettleWait, until every KV has no
// deferred work left (clustertest.KV.Settle).
func (c *cluster) settleStores(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, storeSettleWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, kv := range c.kvs {
		if kv != nil {
			wg.Go(func() { _ = kv.Settle(ctx) })
		}
	}
	wg.Wait()
}

// storeSettleWait bounds settleStores: past it the idle window starts
// anyway, with the store's work in it.
const storeSettleWait = 5 * time.Second

// delegationMsgs sums, over every node, the messages and bytes sent of the
// delegation kinds (epoch agreement and renewal rounds are background).
func (c *cluster) delegationMsgs() (msgs, bytes uint64) {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		for kind, ks := range n.Stats().ByKind {
			if delegationKind[kind] {
				msgs += ks.Sent.Msgs
				bytes += ks.Sent.Bytes
			}
		}
	}
	return msgs, bytes
}

var delegationKind = map[string]bool{
	"acquire": true, "grant": true, "wait": true, "not_home": true, "refused": true, "recall": true,
	"release": true, "renew": true, "renew_reply": true, "withdraw": true, "reclaim": true,
	"reclaim_answer": true, "drain_query": true, "drained": true, "gate_remaining": true,
}
