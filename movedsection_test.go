package homelock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A critical section held through one node keeps its lock when its key's
// home shuts down cleanly (Close: Leave, then hand off): the old home hands
// the running delegation to the key's new home, which renews it from then
// on. It used to end at its lease's end, so a rolling restart ended every
// long lock whose home it restarted. A waiter on a third node gets the key
// once the section ends, with a higher token.
func TestSectionOutlivesItsHomesClose(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	maxLease := c.cfgs[0].MaxLease
	key := c.keyHomedAt(1, "moving")
	h, err := c.nodes[0].Lock(context.Background(), key)
	require.NoError(t, err)

	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[1].Close(closeCtx))
	c.nodes[1] = nil
	require.NoError(t, h.Valid(), "the section ended while its home closed")
	takenOver := c.nodes[0].Stats().TakenOver + c.nodes[2].Stats().TakenOver
	require.Equal(t, uint64(1), takenOver, "delegations taken over by the key's new home")

	got := make(chan Handle, 1)
	go func() {
		h2, err := c.nodes[2].Lock(context.Background(), key, WithWait(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- h2
	}()
	// Well past any lease the old home could have given.
	time.Sleep(8 * maxLease)
	require.NoError(t, h.Valid(), "the section lost its lock %v after its home closed", 8*maxLease)
	select {
	case h2 := <-got:
		t.Fatalf("n3 admitted %s (%s) while n1's section ran", key, h2.Token())
	default:
	}
	require.NoError(t, h.Unlock())
	h2 := <-got
	require.NotNil(t, h2)
	require.True(t, h.Token().Less(h2.Token()), "%s then %s", h.Token(), h2.Token())
	require.NoError(t, h2.Unlock())
}
