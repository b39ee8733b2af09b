package homelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// A single bootstrapped node locks and unlocks; the second lock of the key
// is the fast path (admitted locally, no Acquire at all), and the token and
// signed grant are what a fence.Guard expects.
func TestSingleNodeLockUnlock(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()

	h, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, h.Valid())
	require.Equal(t, "k", h.Key())
	require.Equal(t, ScopeCluster, h.Scope())
	tok := h.Token()
	require.GreaterOrEqual(t, tok.Epoch, uint64(1))
	require.Equal(t, n.Incarnation(), tok.Incarnation)
	require.Equal(t, uint64(1), tok.Section, "the delegation's first critical section")

	g, err := n.KeyRing().Verify(h.Grant())
	require.NoError(t, err)
	// The grant is the delegation's: the home signs it once, the node
	// numbers its sections.
	require.Equal(t, fence.Grant{Resource: "k", Owner: "n1", Token: tok.Delegation(), Domain: "test", Operation: "lock", Scope: fence.ScopeCluster},
		fence.Grant{Resource: g.Resource, Owner: g.Owner, Token: g.Token, Domain: g.Domain, Operation: g.Operation, Scope: g.Scope})

	require.NoError(t, h.Unlock())
	require.NoError(t, h.Unlock(), "Unlock is idempotent")
	require.ErrorIs(t, h.Valid(), ErrLeaseExpired)
	<-h.Done()
	<-h.Context().Done()

	before := n.Stats()
	h2, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, tok.Delegation(), h2.Token().Delegation(), "same delegation")
	require.True(t, tok.Less(h2.Token()), "a token per critical section: %s then %s", tok, h2.Token())
	require.Equal(t, h.Grant(), h2.Grant(), "one signed grant for the delegation")
	require.NoError(t, h2.Unlock())
	after := n.Stats()
	require.Equal(t, before.LocalFast+1, after.LocalFast)
	require.Equal(t, before.ByKind[msg.KindAcquire.String()], after.ByKind[msg.KindAcquire.String()])
	require.Equal(t, before.Sent, after.Sent, "a repeat lock sends nothing")
}

// A queued Lock waits for the holder; TryLock does not.
func TestSingleNodeContention(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()

	h, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	_, err = n.TryLock(ctx, "k")
	require.ErrorIs(t, err, ErrTimeout)

	got := make(chan Handle)
	go func() {
		h2, err := n.Lock(ctx, "k")
		require.NoError(t, err)
		got <- h2
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, h.Unlock())
	h2 := <-got
	require.NoError(t, h2.Valid())
	require.Zero(t, h.Remaining(), "unlocked")

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = n.Lock(short, "k")
	require.ErrorIs(t, err, ErrTimeout)
	// The wait ran out behind a critical section here, not at the home.
	_, err = n.Lock(ctx, "k", WithWait(50*time.Millisecond))
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorContains(t, err, "queued behind a critical section on this node")
	require.NoError(t, h2.Unlock())
}

// The lease of WithLease revokes the handle: Valid fails, Done closes.
func TestLeaseRunsOut(t *testing.T) {
	n := readyNode(t)
	h, err := n.Lock(context.Background(), "k", WithLease(60*time.Millisecond))
	require.NoError(t, err)
	left := h.Remaining()
	require.Greater(t, left, time.Duration(0))
	require.LessOrEqual(t, left, 60*time.Millisecond, "no more than its own lease")
	select {
	case <-h.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after the lease")
	}
	require.ErrorIs(t, h.Valid(), ErrLeaseExpired)
	require.ErrorContains(t, h.Valid(), "lost: its lease ran out")
	require.Zero(t, h.Remaining())
	require.ErrorIs(t, h.Unlock(), ErrLeaseExpired)
	require.ErrorContains(t, h.Unlock(), "lost before unlock: its lease ran out")
	require.ErrorIs(t, h.Context().Err(), context.Canceled)
}

func TestCloseThenLock(t *testing.T) {
	n := readyNode(t)
	require.NoError(t, n.Close(context.Background()))
	_, err := n.Lock(context.Background(), "k")
	require.True(t, errors.Is(err, ErrClosed), "%v", err)
}

// A section still held when its node is killed ends, and says why.
func TestKillEndsHeldSections(t *testing.T) {
	n := readyNode(t)
	h, err := n.Lock(context.Background(), "k")
	require.NoError(t, err)
	require.NoError(t, n.Close(killed()))
	<-h.Done()
	require.ErrorIs(t, h.Valid(), ErrLeaseExpired)
	require.ErrorContains(t, h.Valid(), "lost: the node closed")
}
