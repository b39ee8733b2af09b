package homelock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A critical section keeps its lock while another node waits: past several
// MaxLeases with no lease of its own (held while alive), and to the end of
// an explicit lease longer than MaxLease (honoured by renewal, not capped).
// The waiter gets the key once the section ends.
func TestHeldWhileAliveContended(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.waitAvailable()
	maxLease := c.cfgs[0].MaxLease
	for _, lease := range []time.Duration{0, 6 * maxLease} {
		key := c.keyHomedAt(1, "held")
		var opts []LockOption
		if lease > 0 {
			opts = append(opts, WithLease(lease))
		}
		h, err := c.nodes[0].Lock(context.Background(), key, opts...)
		require.NoError(t, err)
		got := make(chan Handle, 1)
		go func() {
			h2, err := c.nodes[1].Lock(context.Background(), key, WithWait(time.Minute))
			if err != nil {
				t.Error(err)
			}
			got <- h2
		}()
		// Several MaxLeases while the other node waits: the section is still
		// valid, so the waiter cannot have it.
		time.Sleep(4 * maxLease)
		require.NoError(t, h.Valid(), "lease %v: a contended section lost its lock after %v", lease, 4*maxLease)
		select {
		case h2 := <-got:
			t.Fatalf("lease %v: %s admitted %s while n1's section ran", lease, h2.Token(), key)
		default:
		}
		if lease == 0 {
			require.NoError(t, h.Unlock())
		} else {
			<-h.Done() // its own lease, not MaxLease, ends it
		}
		h2 := <-got
		require.NotNil(t, h2)
		require.True(t, h.Token().Less(h2.Token()))
		require.NoError(t, h2.Unlock())
	}
}
