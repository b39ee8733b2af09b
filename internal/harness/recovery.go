package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homelock/homelock"
)

// lockUntil retries Lock on node i until it succeeds, and returns when.
func (c *cluster) lockUntil(ctx context.Context, i int, key string) (time.Time, error) {
	for {
		h, err := c.nodes[i].Lock(ctx, key, homelock.WithWait(200*time.Millisecond))
		if err == nil {
			at := time.Now()
			_ = h.Unlock()
			return at, nil
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("key %s never granted: %w", key, err)
		}
		if !errors.Is(err, homelock.ErrTimeout) && !errors.Is(err, homelock.ErrLockUnavailable) {
			return time.Time{}, err
		}
	}
}

// reclaim kills the home of a key and starts it again (a crash and restart:
// it stays a member of the epoch, where a clean Close would hand its keys off
// and leave), and measures from the start of the restart to the first grant
// of a key it homes by the restarted home.
func (c *cluster) reclaim(ctx context.Context, r *Report, round int) error {
	const home = 1
	next := 0
	key := c.keyHomedAt(c.ring(0), c.nodes[home].ID(), false, fmt.Sprintf("reclaim-%d", round), &next)
	if _, err := c.lockUntil(ctx, 0, key); err != nil {
		return err
	}
	// Reclaim may skip the restart gate only once the home persisted that
	// the epoch's own gate had passed (docs/design.md, "Restarts and reclaim"), EpochLease + Skew
	// after it learned the epoch; sooner, the restart would measure the
	// gate instead. That wait counts from the last restart too, of any
	// node: a restart of node 2 under EpochLease after node 1's waited out
	// the whole gate (8.4 s).
	cfg0 := c.cfgs[home]
	if err := sleepUntil(ctx, c.settled.Add(cfg0.EpochLease+cfg0.Skew+2*cfg0.RetryInterval)); err != nil {
		return err
	}
	inc := c.nodes[home].Incarnation()
	addr := c.nodes[home].GRPCAddr()
	_ = c.nodes[home].Close(killed(ctx))
	c.nodes[home] = nil
	start := time.Now()
	n, err := c.reopen(ctx, home, addr)
	if err != nil {
		return err
	}
	if n.Incarnation() <= inc {
		return fmt.Errorf("incarnation %d after restart, was %d", n.Incarnation(), inc)
	}
	key2 := c.keyHomedAt(c.ring(0), n.ID(), false, fmt.Sprintf("reclaim-%d", round), &next)
	at, err := c.lockUntil(ctx, 0, key2)
	if err != nil {
		return err
	}
	// It granted, so every epoch its restart brought is learned by now.
	c.settled = at
	r.record("reclaim_ms", ms(at.Sub(start)))
	return nil
}

// reopen starts node i again from its data, as a restart does (no
// bootstrap), at addr, its own address as a deployment restarts a node (at
// another one it would also ask to rejoin: an epoch more), and attaches its
// store to it.
func (c *cluster) reopen(ctx context.Context, i int, addr string) (*homelock.Node, error) {
	cfg := c.cfgs[i]
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	cfg.GRPCAddr = addr
	n, err := homelock.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", cfg.NodeID, err)
	}
	c.nodes[i] = n
	c.kvs[i].Attach(n)
	return n, nil
}

// rehome kills a node (Close with a context already cancelled: no drain, no
// release, no handoff) and measures until a key it was home for is granted
// by its new home. Nothing held the key, so the grant must come from the new
// home, after detection and the key's activation gate (no Drained can come
// from a dead home). Detection is measured too, as the moment node 0 learns
// an epoch without the killed node (memberlist's failure detection, then
// DownAfter, then agreement): the target is detection + EpochLease + Skew,
// plus the grant's own latency.
func (c *cluster) rehome(ctx context.Context, r *Report) error {
	victim := len(c.nodes) - 1
	next := 0
	key := c.keyHomedAt(c.ring(0), c.nodes[victim].ID(), false, "rehome", &next)
	gone := c.nodes[victim].ID()
	start := time.Now()
	_ = c.nodes[victim].Close(killed(ctx))
	c.nodes[victim] = nil
	detected := make(chan time.Time, 1)
	go func() { detected <- c.epochWithout(ctx, 0, gone) }()
	at, err := c.lockUntil(ctx, 0, key)
	agreed := <-detected
	if err != nil {
		return err
	}
	if agreed.IsZero() {
		return fmt.Errorf("node 0 never learned an epoch without %s", gone)
	}
	cfg := c.cfgs[0]
	r.record("rehome_ms", ms(at.Sub(start)))
	r.record("rehome_detect_ms", ms(agreed.Sub(start)))
	// The new home's gate ends exactly at detection + EpochLease + Skew (as
	// it learned the epoch), so a grant can only follow it: the bound allows
	// the grant's own latency, one RetryInterval.
	r.record("rehome_bound_ms", ms(agreed.Sub(start)+cfg.EpochLease+cfg.Skew+cfg.RetryInterval))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// epochWithout polls node i until its learned epoch no longer has member id,
// and returns when it saw that (zero if ctx ended first).
func (c *cluster) epochWithout(ctx context.Context, i int, id string) time.Time {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		st := c.nodes[i].Status()
		if st.Epoch > 0 && !slices.ContainsFunc(st.Members, func(m homelock.MemberStatus) bool { return m.ID == id }) {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-t.C:
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// killed is a context already done: Close given it is a kill (no drain, no
// release, no handoff, nothing sent).
func killed(ctx context.Context) context.Context {
	k, cancel := context.WithCancel(ctx)
	cancel()
	return k
}
