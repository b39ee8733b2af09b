package homelock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/fence"
)

// TestHooklessHandoffsStepFollowUps: a node without store hooks completes
// each handoff's Settle and WaitFresh at once, as steps of their own after
// the step that asked for them (in this package's tests apply panics on a
// step inside a step). A key passed back and forth between two nodes goes
// through both on every pass, each section under a higher token.
func TestHooklessHandoffsStepFollowUps(t *testing.T) {
	c := newCluster(t, 3, longLeases)
	c.waitAvailable()
	require.Nil(t, c.cfgs[0].Barrier)
	require.Nil(t, c.cfgs[1].WaitFresh)
	key := c.keyHomedAt(2, "follow-up")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last fence.Token
	for i := range 8 {
		h, err := c.nodes[i%2].Lock(ctx, key)
		require.NoError(t, err, "pass %d", i)
		require.Positive(t, h.Token().Compare(last), "pass %d: token %s after %s", i, h.Token(), last)
		last = h.Token()
		require.NoError(t, h.Unlock(), "pass %d", i)
	}
}
