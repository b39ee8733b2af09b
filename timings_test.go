package homelock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRollingTimingsChangeFailsClosed: a 3-node cluster changes its
// EpochLease one node at a time, as an operator rolling a config change
// would. From the first restarted node until every node runs the new value,
// every cluster-scope Lock on every node fails with ErrLockUnavailable,
// promptly and saying which node runs what (a new home's gate sized by the
// shorter EpochLease would not outlast an old home's liveness sized by the
// longer: docs/design.md, H26); node-scope locks work. Once all run the same
// timings, every node locks again.
func TestRollingTimingsChangeFailsClosed(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()
	lockAll := func(what string) {
		for i, n := range c.nodes {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			h, err := n.Lock(lctx, "shared")
			cancel()
			require.NoError(t, err, "%s: node %d", what, i)
			require.NoError(t, h.Unlock())
		}
	}
	lockAll("before the change")
	old := c.cfgs[0].EpochLease

	for i := range c.nodes {
		require.NoError(t, c.nodes[i].Close(killed()))
		cfg := c.cfgs[i]
		cfg.EpochLease = old + 300*time.Millisecond
		n, err := Open(ctx, cfg)
		require.NoError(t, err, "reopen node %d with a longer EpochLease", i)
		c.nodes[i], c.cfgs[i] = n, cfg
		if i == len(c.nodes)-1 {
			break
		}
		for j, m := range c.nodes {
			// Gossip carries the restarted node's timings within a few
			// of its rounds; the lock must fail closed from then on.
			var err error
			require.Eventually(t, func() bool {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				var h Handle
				if h, err = m.Lock(lctx, "shared"); err == nil {
					require.NoError(t, h.Unlock())
				}
				return errors.Is(err, ErrLockUnavailable) && strings.Contains(err.Error(), "runs EpochLease")
			}, 5*time.Second, 20*time.Millisecond, "node %d kept locking with node %d's other EpochLease: %v", j, i, err)
			other, own := c.cfgs[i].EpochLease, c.cfgs[j].EpochLease
			if j == i {
				other = old
			}
			require.Contains(t, err.Error(), "runs EpochLease "+other.String(), "node %d", j)
			require.Contains(t, err.Error(), "this node runs EpochLease "+own.String(), "node %d", j)
			start := time.Now()
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = m.Lock(lctx, "shared")
			cancel()
			require.ErrorIs(t, err, ErrLockUnavailable, "node %d", j)
			require.Less(t, time.Since(start), 100*time.Millisecond, "node %d did not fail closed at once", j)
			require.False(t, m.Status().Available, "node %d reports itself available", j)
			h, err := m.Lock(ctx, "local-only", WithScope(ScopeNode))
			require.NoError(t, err, "node-scope lock on node %d", j)
			require.NoError(t, h.Unlock())
		}
	}
	start := time.Now()
	c.waitAvailable()
	lockAll("after the change")
	t.Logf("every node locked again %v after the last restart", time.Since(start).Round(time.Millisecond))
}
