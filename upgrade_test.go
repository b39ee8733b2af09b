package homelock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRollingUpgrade: a 3-node cluster upgrades from this build's protocol
// version to the next (v1 and v2 below stand for them) one
// node at a time. Before, cluster locks work; from the first upgraded node
// until the epoch carries v2 for every member, every cluster-scope Lock on
// every node fails with ErrLockUnavailable at once, while node-scope locks
// work; after, cluster locks work again. Throughout, no two holders of one
// key at any time.
func TestRollingUpgrade(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()

	var inside atomic.Int32
	var overlaps atomic.Int32
	critical := func(h Handle) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		inside.Add(-1)
		require.NoError(t, h.Unlock())
	}
	lockAll := func(what string) {
		var wg sync.WaitGroup
		for i, n := range c.nodes {
			wg.Go(func() {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				h, err := n.Lock(lctx, "shared")
				require.NoError(t, err, "%s: node %d", what, i)
				critical(h)
			})
		}
		wg.Wait()
	}
	lockAll("before the upgrade")

	for i := range c.nodes {
		// A crash and restart at v2: the node stays a member, so its epoch
		// entry is stale (a clean Close would leave the epoch first).
		require.NoError(t, c.nodes[i].Close(killed()))
		cfg := c.cfgs[i]
		cfg.version = ProtocolVersion + 1
		n, err := Open(ctx, cfg)
		require.NoError(t, err, "reopen node %d at v2", i)
		c.nodes[i], c.cfgs[i] = n, cfg
		// Wait until every node's epoch records node i at v2.
		require.Eventually(t, func() bool {
			for _, m := range c.nodes {
				if version(m, c.cfgs[i].NodeID) != ProtocolVersion+1 {
					return false
				}
			}
			return true
		}, 10*time.Second, 10*time.Millisecond, "the epoch never carried node %d at v2", i)
		if i == len(c.nodes)-1 {
			break
		}
		for j, m := range c.nodes {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start := time.Now()
			_, err := m.Lock(lctx, "shared")
			cancel()
			require.True(t, errors.Is(err, ErrLockUnavailable), "mixed versions: node %d locked or failed otherwise: %v", j, err)
			require.Less(t, time.Since(start), 500*time.Millisecond, "node %d did not fail closed promptly", j)
			h, err := m.Lock(ctx, "local-only", WithScope(ScopeNode))
			require.NoError(t, err, "node-scope lock on node %d", j)
			require.NoError(t, h.Unlock())
		}
	}
	c.waitAvailable()
	lockAll("after the upgrade")
	require.Zero(t, overlaps.Load(), "two holders of one key at once")
}

// version is the protocol version node m's epoch records for id (0: none).
func version(m *Node, id string) uint32 {
	for _, mem := range m.Status().Members {
		if mem.ID == id {
			return mem.Version
		}
	}
	return 0
}
