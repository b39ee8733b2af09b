package homelock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// cutTransport is a node's gRPC transport with its link to one peer cut:
// while cut is set, what it sends to that peer goes to an address where
// nothing answers, as a cut that drops packets looks to a dialer.
type cutTransport struct {
	*transport.GRPC
	peer msg.NodeID
	deaf string
	cut  *atomic.Bool
}

func (c *cutTransport) route(to msg.Member) msg.Member {
	if c.cut.Load() && to.ID == c.peer {
		to.Addr = c.deaf
	}
	return to
}

func (c *cutTransport) Send(to msg.Member, env msg.Envelope) error {
	return c.GRPC.Send(c.route(to), env)
}

func (c *cutTransport) SendBatch(to msg.Member, envs []msg.Envelope) error {
	return c.GRPC.SendBatch(c.route(to), envs)
}

func (c *cutTransport) Reached(to msg.Member) bool { return c.GRPC.Reached(c.route(to)) }

// cutCluster is three nodes on loopback whose gRPC link between n1 and n2
// cut cuts, each with the transport Open would give it (RelayAfter
// included) under a cutTransport.
type cutCluster struct {
	*cluster
	cut   atomic.Bool
	grpcs map[string]*transport.GRPC // by node ID; filled before Open returns
}

func newCutCluster(t *testing.T, timings func(*Config)) *cutCluster {
	cc := &cutCluster{grpcs: map[string]*transport.GRPC{}}
	var mu sync.Mutex // the nodes open at once
	peerOf := map[string]msg.NodeID{"n1": "n2", "n2": "n1"}
	cc.cluster = newCluster(t, 3, func(cfg *Config) {
		timings(cfg)
		cfg.AdvertiseAddr = freeAddr(t)
		id, relayAfter := cfg.NodeID, cfg.relayAfter()
		deaf := deafAddr(t)
		cfg.Transport = func(self msg.Member, h transport.Handler) (transport.Transport, error) {
			g, err := transport.NewGRPC(transport.Config{NodeID: self.ID, ListenAddr: self.Addr, RelayAfter: relayAfter}, h)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			cc.grpcs[id] = g
			mu.Unlock()
			return &cutTransport{GRPC: g, peer: peerOf[id], deaf: deaf, cut: &cc.cut}, nil
		}
	})
	cc.waitAvailable()
	return cc
}

// TestPartialPartitionRelays: n1 and n2 cannot reach each other on the
// lock protocol's transport while both reach n3 (and gossip, through n3's
// indirect probes, keeps both alive, so the epoch keeps all three). The
// keys each of n1 and n2 homes stay lockable through the other, relayed by
// n3 (each side relays RelayAfter after its first send found no stream,
// half a second here, and answers what came relayed through relays at
// once), and the epoch does not change.
func TestPartialPartitionRelays(t *testing.T) {
	c := newCutCluster(t, longLeases)
	cut, grpcs := &c.cut, c.grpcs
	atN2, atN1 := c.keyHomedAt(1, "relay-n2"), c.keyHomedAt(0, "relay-n1")
	lock := func(i int, key string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		h, err := c.nodes[i].Lock(ctx, key)
		require.NoError(t, err, "lock %s through n%d", key, i+1)
		require.NoError(t, h.Unlock())
		return time.Since(start)
	}
	epoch := func(i int) uint64 {
		c.nodes[i].mu.Lock()
		defer c.nodes[i].mu.Unlock()
		l, _ := c.nodes[i].core.Current()
		return l.Epoch.Number
	}
	before := epoch(0)

	cut.Store(true)
	tookN2 := lock(0, atN2)
	tookN1 := lock(1, atN1)
	t.Logf("after the cut: %s (home n2) through n1 in %v, %s (home n1) through n2 in %v", atN2, tookN2, atN1, tookN1)
	for range 20 {
		lock(0, atN2)
		lock(1, atN1)
	}
	for i := range c.nodes {
		require.Equal(t, before, epoch(i), "n%d's epoch changed during the cut", i+1)
	}
	relayed := func(i int, id string) bool {
		for _, m := range c.nodes[i].Status().Members {
			if m.ID == id {
				return m.Relayed
			}
		}
		return false
	}
	require.True(t, relayed(0, "n2"), "n1's status of n2 during the cut")
	require.False(t, relayed(0, "n3"), "n1's status of n3")
	s1, s2, s3 := grpcs["n1"].Stats(), grpcs["n2"].Stats(), grpcs["n3"].Stats()
	require.NotZero(t, s1.Relayed, "n1 relayed nothing")
	require.NotZero(t, s2.Relayed, "n2 relayed nothing")
	require.NotZero(t, s3.Forwarded, "n3 forwarded nothing")
	t.Logf("relayed by n1 %d, by n2 %d; forwarded by n3 %d, dropped %d", s1.Relayed, s2.Relayed, s3.Forwarded, s3.RelayDropped)

	cut.Store(false)
	lock(0, atN2)
	lock(1, atN1)
	require.Eventually(t, func() bool { return !relayed(0, "n2") }, 5*time.Second, 10*time.Millisecond, "n1's status of n2 once its stream is back")
}

// TestSectionsOutlastAFreshCut: sections held through n1 on keys homed at
// n2 run on when n1 and n2 are cut from each other (both still reaching
// n3), with the default timings. Each renews half a lease (1 s) before its
// lease ends, and the first renewal after the cut is often the first write
// into it. So the relays must start, and the renewal's answer come back
// through them, within that second: RelayAfter is a quarter of MaxLease
// (Config.relayAfter), and the home answers what came relayed through
// relays at once rather than a RelayAfter after its own first write into
// the cut. With RelayAfter at 1 s, or without the relayed answer, two of
// the eight sections here were lost; before both, all eight.
func TestSectionsOutlastAFreshCut(t *testing.T) {
	c := newCutCluster(t, func(cfg *Config) {
		d := DefaultConfig()
		cfg.EpochLease, cfg.MaxLease, cfg.MinUseful, cfg.Skew = d.EpochLease, d.MaxLease, d.MinUseful, d.Skew
		cfg.RetryInterval, cfg.DownAfter = d.RetryInterval, d.DownAfter
	})
	// Eight sections whose renewals spread over two of their periods, so
	// that some renewal is due right after the cut, whenever it comes.
	var held []Handle
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		h, err := c.nodes[0].Lock(ctx, c.keyHomedAt(1, fmt.Sprintf("fresh-cut-%d", i)))
		cancel()
		require.NoError(t, err)
		held = append(held, h)
		time.Sleep(250 * time.Millisecond)
	}
	c.cut.Store(true)
	// Three leases: each section renews at least twice through n3.
	time.Sleep(3 * DefaultConfig().MaxLease)
	for _, h := range held {
		require.NoError(t, h.Valid(), "a section held through n1 across the cut")
	}
	require.NotZero(t, c.grpcs["n3"].Stats().Forwarded, "n3 forwarded nothing: the sections did not renew across the cut")
	for _, h := range held {
		require.NoError(t, h.Unlock())
	}
}
