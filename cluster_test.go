package homelock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

// Three nodes on loopback (gRPC, memberlist, Pebble): every node locks keys
// homed on each node, and a repeat lock on a remotely homed key is local.
func TestThreeNodesLockEverywhere(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()
	for i, n := range c.nodes {
		for j := range c.nodes {
			key := c.keyHomedAt(j, "k"+n.ID())
			h, err := n.Lock(ctx, key)
			require.NoError(t, err, "node %d key homed at %d", i, j)
			require.NoError(t, h.Valid())
			tok := h.Token()
			require.NoError(t, h.Unlock())

			// Remote or not, the second lock is the fast path: no Acquire.
			before := n.Stats()
			h, err = n.Lock(ctx, key)
			require.NoError(t, err)
			// Same delegation, the next critical section's token.
			require.Equal(t, tok.Delegation(), h.Token().Delegation())
			require.Equal(t, tok.Section+1, h.Token().Section)
			require.NoError(t, h.Unlock())
			after := n.Stats()
			require.Equal(t, before.LocalFast+1, after.LocalFast)
			require.Equal(t, before.ByKind[msg.KindAcquire.String()].Sent, after.ByKind[msg.KindAcquire.String()].Sent)
		}
	}
}

// Workers on all three nodes increment one shared counter under the lock;
// no update is lost, and tokens seen in order never go back.
func TestThreeNodesContention(t *testing.T) {
	c := newCluster(t, 3, longLeases)
	c.waitAvailable()
	const perWorker = 15
	var (
		mu      sync.Mutex
		counter int
		inside  atomic.Int32
		order   []string // node of each critical section, in order
	)
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		for range 2 {
			wg.Go(func() {
				for range perWorker {
					h, err := n.Lock(context.Background(), "counter")
					if !assertNoError(t, err) {
						return
					}
					if inside.Add(1) != 1 {
						t.Errorf("two critical sections at once")
					}
					mu.Lock()
					v := counter
					mu.Unlock()
					time.Sleep(200 * time.Microsecond)
					if h.Valid() == nil {
						mu.Lock()
						counter = v + 1
						order = append(order, n.ID())
						mu.Unlock()
					} else {
						t.Errorf("lease lost mid-section: %v", h.Valid())
					}
					inside.Add(-1)
					_ = h.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.Equal(t, 3*2*perWorker, counter)
	// Fairness: a node does not keep the key while others wait (a contended
	// grant admits one critical section). Long runs of one node mean the
	// holder never learned that others waited.
	run, longest := 0, 0
	for i := range order {
		if i > 0 && order[i] == order[i-1] {
			run++
		} else {
			run = 1
		}
		longest = max(longest, run)
	}
	require.LessOrEqual(t, longest, 2*perWorker/3, "longest run of one node: %d", longest)
	var grants uint64
	for _, n := range c.nodes {
		grants += n.Stats().Grants
	}
	t.Logf("grants=%d for %d critical sections", grants, counter)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// Close then Open in one process: the incarnation is higher and tokens keep
// increasing.
func TestCloseThenOpen(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()
	key := c.keyHomedAt(1, "restart")
	h, err := c.nodes[0].Lock(ctx, key)
	require.NoError(t, err)
	tok1 := h.Token()
	require.NoError(t, h.Unlock())

	inc := c.nodes[1].Incarnation()
	require.NoError(t, c.nodes[1].Close(ctx))
	n, err := Open(ctx, c.cfgs[1])
	require.NoError(t, err)
	c.nodes[1] = n
	require.Greater(t, n.Incarnation(), inc)

	// n1 released its delegation when? It may still hold it; lock from n3 so
	// the new home must grant afresh.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err = c.nodes[2].Lock(lctx, key)
	require.NoError(t, err)
	require.True(t, tok1.Less(h.Token()), "%s then %s", tok1, h.Token())
	require.NoError(t, h.Unlock())
}

// A one-node cluster restarted at another gRPC address (a port chosen at
// start, a rescheduled pod) is the only member able to record its new
// address: it agrees the epoch that does, and grants again. It used to wait
// for ever for another member to do it, refusing every lock.
func TestSoleMemberRestartsAtAnotherAddress(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.waitAvailable()
	ctx := context.Background()
	before := c.nodes[0].GRPCAddr()
	epoch := c.nodes[0].Status().Epoch
	require.NoError(t, c.nodes[0].Close(killed()))
	c.nodes[0] = nil
	n, err := Open(ctx, c.cfgs[0]) // GRPCAddr 127.0.0.1:0: another port
	require.NoError(t, err)
	c.nodes[0] = n
	require.NotEqual(t, before, n.GRPCAddr())
	c.waitAvailable()
	st := n.Status()
	require.Greater(t, st.Epoch, epoch, "no epoch recorded the new address")
	require.Len(t, st.Members, 1)
	require.Equal(t, n.GRPCAddr(), st.Members[0].Addr)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := n.Lock(lctx, "after-move")
	require.NoError(t, err)
	require.NoError(t, h.Unlock())
}

// A killed node (it hands nothing off) is agreed down after DownAfter; its
// keys get a new home.
func TestKilledNodeRehomed(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	ctx := context.Background()
	key := c.keyHomedAt(2, "moved")
	h, err := c.nodes[0].Lock(ctx, key)
	require.NoError(t, err)
	tok1 := h.Token()
	require.NoError(t, h.Unlock())
	held, err := c.nodes[0].Lock(ctx, c.keyHomedAt(2, "held"))
	require.NoError(t, err)

	require.NoError(t, c.nodes[2].Close(killed()))
	c.nodes[2] = nil
	// The section n1 held under n3's delegation ends when that delegation
	// can no longer be renewed, and says so.
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a section under a killed home's delegation outlived the delegation's lease")
	}
	require.ErrorContains(t, held.Valid(), "lost: delegation lease expired")
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := c.nodes[0].Status()
		if len(st.Members) == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "n3 never removed: %+v", st)
		time.Sleep(20 * time.Millisecond)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err = c.nodes[1].Lock(lctx, key)
	require.NoError(t, err)
	require.True(t, tok1.Less(h.Token()))
	require.NotEqual(t, 2, c.homeOf(key))
	require.NoError(t, h.Unlock())
}

// Status says when each member's peer messages last reached the node: on a
// healthy cluster every other member within its renewal rounds' interval.
func TestStatusSaysWhenEachMemberWasHeard(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	epochLease := c.cfgs[0].EpochLease
	require.Eventually(t, func() bool {
		st := c.nodes[0].Status()
		if len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if m.Self != m.Heard.IsZero() || (!m.Self && time.Since(m.Heard) > epochLease) {
				return false
			}
		}
		return true
	}, 2*epochLease, 20*time.Millisecond, "members heard: %+v", c.nodes[0].Status().Members)
}
