package homelock

import (
	"context"
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

// TestPartialPartitionRelays: n1 and n2 cannot reach each other on the
// lock protocol's transport while both reach n3 (and gossip, through n3's
// indirect probes, keeps both alive, so the epoch keeps all three). The
// keys each of n1 and n2 homes stay lockable through the other, relayed by
// n3 (each side relays RelayAfter after its first send found no stream:
// about 2 s here), and the epoch does not change.
func TestPartialPartitionRelays(t *testing.T) {
	var cut atomic.Bool
	var mu sync.Mutex // the nodes open at once
	grpcs := map[string]*transport.GRPC{}
	peerOf := map[string]msg.NodeID{"n1": "n2", "n2": "n1"}
	c := newCluster(t, 3, func(cfg *Config) {
		longLeases(cfg)
		cfg.AdvertiseAddr = freeAddr(t)
		id := cfg.NodeID
		deaf := deafAddr(t)
		cfg.Transport = func(self msg.Member, h transport.Handler) (transport.Transport, error) {
			g, err := transport.NewGRPC(transport.Config{NodeID: self.ID, ListenAddr: self.Addr}, h)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			grpcs[id] = g
			mu.Unlock()
			return &cutTransport{GRPC: g, peer: peerOf[id], deaf: deaf, cut: &cut}, nil
		}
	})
	c.waitAvailable()
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
	mu.Lock()
	s1, s2, s3 := grpcs["n1"].Stats(), grpcs["n2"].Stats(), grpcs["n3"].Stats()
	mu.Unlock()
	require.NotZero(t, s1.Relayed, "n1 relayed nothing")
	require.NotZero(t, s2.Relayed, "n2 relayed nothing")
	require.NotZero(t, s3.Forwarded, "n3 forwarded nothing")
	t.Logf("relayed by n1 %d, by n2 %d; forwarded by n3 %d, dropped %d", s1.Relayed, s2.Relayed, s3.Forwarded, s3.RelayDropped)

	cut.Store(false)
	lock(0, atN2)
	lock(1, atN1)
	require.Eventually(t, func() bool { return !relayed(0, "n2") }, 5*time.Second, 10*time.Millisecond, "n1's status of n2 once its stream is back")
}
