package homelock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a lease clock and a wall clock the test moves: Now follows
// the real monotonic clock plus an offset, Wall the same plus its own.
type fakeClock struct {
	mu         sync.Mutex
	start      time.Time
	wallOffset time.Duration
}

func (c *fakeClock) Now() time.Time { return bootEpoch.Add(time.Since(c.start) + time.Hour) }

func (c *fakeClock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Unix(2_000_000_000, 0).Add(time.Since(c.start) + c.wallOffset)
}

func (c *fakeClock) jump(d time.Duration) {
	c.mu.Lock()
	c.wallOffset += d
	c.mu.Unlock()
}

// lockedOnFakeClock starts one node on a fakeClock and locks "k" on it.
func lockedOnFakeClock(t *testing.T) (*Node, *fakeClock, Handle) {
	clk := &fakeClock{start: time.Now()}
	c := newCluster(t, 1, func(cfg *Config) { cfg.Clock = clk })
	c.waitAvailable()
	n := c.nodes[0]
	h, err := n.Lock(context.Background(), "k")
	require.NoError(t, err)
	return n, clk, h
}

// TestClockJumpDropsHeldDelegations (H9): when the wall clock runs ahead of
// the lease clock by more than JumpAfter (a suspended machine whose lease clock
// did not count the suspend), the node drops what it holds at once: the
// handle is revoked. Clocks that advance together never trigger it.
func TestClockJumpDropsHeldDelegations(t *testing.T) {
	n, clk, h := lockedOnFakeClock(t)
	time.Sleep(10 * n.cfg.RetryInterval)
	require.NoError(t, h.Valid(), "no jump happened, the handle must still be valid")
	require.Zero(t, n.Stats().ClockJumps)

	clk.jump(3 * n.cfg.Skew)
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a wall-clock jump did not revoke the held handle")
	}
	require.True(t, errors.Is(h.Valid(), ErrLeaseExpired), "Valid after the jump: %v", h.Valid())
	require.ErrorContains(t, h.Valid(), "lost: clock jump")
	require.Equal(t, uint64(1), n.Stats().ClockJumps)
}

// TestClockJumpSeenByFirstStep: after a jump, the first step the node takes
// under its locks judges it before acting, whatever that step is, not only
// the timer's (up to 100 ms later): here a TryLock of the key, which a
// section on this node holds. Without the check it answers at once that the
// section holds the key, and the jump is not yet counted.
func TestClockJumpSeenByFirstStep(t *testing.T) {
	n, clk, h := lockedOnFakeClock(t)
	require.Zero(t, n.Stats().ClockJumps)

	clk.jump(3 * n.cfg.Skew)
	if h2, err := n.TryLock(context.Background(), "k"); err == nil {
		h2.Unlock()
	}
	require.Equal(t, uint64(1), n.Stats().ClockJumps, "the TryLock's step did not judge the jump")
	require.True(t, errors.Is(h.Valid(), ErrLeaseExpired), "Valid after the jump: %v", h.Valid())
}
