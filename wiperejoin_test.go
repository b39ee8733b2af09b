package homelock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWipeAndRejoinAfterRestarts: docs/operations.md's "wipe and rejoin"
// for a node that had restarted before. Its old store reached incarnation
// 4, and each restart's reclaim told the members to ignore anything below
// it; the wiped directory starts again at incarnation 1. The members must
// judge that per store, not per node ID: judged per node ID (until
// 2026-12-07) they dropped every message of the new store, which asked to
// join without end and was never let in.
func TestWipeAndRejoinAfterRestarts(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()
	for range 3 {
		require.NoError(t, c.nodes[2].Close(killed()))
		n, err := Open(ctx, c.cfgs[2])
		require.NoError(t, err)
		c.nodes[2] = n
		c.waitAvailable()
	}
	require.EqualValues(t, 4, c.nodes[2].Status().Incarnation)

	require.NoError(t, c.nodes[2].Close(killed()))
	c.nodes[2] = nil
	// Until gossip has found the old process gone the members would refuse
	// the new store as a duplicate ID; restarting it after such a refusal
	// would raise its incarnation and hide what this tests.
	require.Eventually(t, func() bool {
		for _, n := range c.nodes[:2] {
			for _, m := range n.Status().Members {
				if m.ID == "n3" && m.Liveness != "dead" {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "gossip never found n3 gone")

	cfg := c.cfgs[2]
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	cfg.Join = []string{c.cfgs[0].GossipAddr}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	n, err := Open(octx, cfg)
	require.NoError(t, err, "the wiped n3 was not let in")
	c.nodes[2], c.cfgs[2] = n, cfg
	require.EqualValues(t, 1, n.Status().Incarnation, "the wiped store's first start")
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	h, err := n.Lock(lctx, "after-wipe")
	require.NoError(t, err)
	require.NoError(t, h.Unlock())
	t.Logf("the wiped n3 joined and locked %v after it started", time.Since(start).Round(time.Millisecond))
}
