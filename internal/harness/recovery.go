package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/fence"
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

// reclaim restarts the home of a key and measures from the start of the
// restart to the first grant of that key by the restarted home.
func (c *cluster) reclaim(ctx context.Context, r *Report) error {
	const home = 1
	next := 0
	key := c.keyHomedAt(c.ring(0), c.nodes[home].ID(), false, "reclaim", &next)
	if _, err := c.lockUntil(ctx, 0, key); err != nil {
		return err
	}
	inc := c.nodes[home].Incarnation()
	if err := c.nodes[home].Close(ctx); err != nil {
		return fmt.Errorf("close %s: %w", c.cfgs[home].NodeID, err)
	}
	c.nodes[home] = nil
	cfg := c.cfgs[home]
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	start := time.Now()
	n, err := homelock.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", cfg.NodeID, err)
	}
	c.nodes[home] = n
	c.kvs[home].Attach(n)
	if n.Incarnation() <= inc {
		return fmt.Errorf("incarnation %d after restart, was %d", n.Incarnation(), inc)
	}
	key2 := c.keyHomedAt(c.ring(0), n.ID(), false, "reclaim", &next)
	at, err := c.lockUntil(ctx, 0, key2)
	if err != nil {
		return err
	}
	r.ReclaimMs = float64(at.Sub(start).Microseconds()) / 1000
	return nil
}

// rehome kills a node (Close with a context already cancelled: no drain, no
// release, no handoff) and measures until a key it was home for is granted
// by its new home. Nothing held the key, so the grant must come from the new
// home, after failure detection, DownAfter, agreement and the key's
// activation gate (no Drained can come from a dead home).
func (c *cluster) rehome(ctx context.Context, r *Report) error {
	victim := len(c.nodes) - 1
	next := 0
	key := c.keyHomedAt(c.ring(0), c.nodes[victim].ID(), false, "rehome", &next)
	killed, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	_ = c.nodes[victim].Close(killed)
	c.nodes[victim] = nil
	at, err := c.lockUntil(ctx, 0, key)
	if err != nil {
		return err
	}
	cfg := c.cfgs[0]
	r.RehomeMs = float64(at.Sub(start).Microseconds()) / 1000
	r.RehomeBoundMs = float64((cfg.DownAfter + cfg.EpochLease + cfg.Skew + gossipDetection).Milliseconds())
	return nil
}

// gossipDetection is memberlist's time to declare a stopped member dead with
// transport.LocalTimings (probe, suspicion); DownAfter counts from there.
const gossipDetection = 3 * time.Second

// idleDelegations holds count delegations on one node and measures the heap
// each costs. A single node with long leases: keys homed there, so both the
// home's table entry and the holder's state are counted.
func idleDelegations(ctx context.Context, dir string, count int, r *Report) error {
	n, err := holdIdle(ctx, dir, count, nil, r)
	if n != nil {
		n.Close(context.Background())
	}
	return err
}

// holdIdle is idleDelegations that leaves the node open (nil on a failed
// start), so that a test can look at its heap while the delegations are held.
// With a key ring the grants are signed, as a deployment's would be.
func holdIdle(ctx context.Context, dir string, count int, ring *fence.KeyRing, r *Report) (*homelock.Node, error) {
	cfg, err := nodeConfig(dir, "mem", ring)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = filepath.Join(dir, "mem")
	cfg.Bootstrap, cfg.InitialMembers = true, []string{"mem"}
	cfg.MaxLease = 10 * time.Minute
	cfg.EpochLease = 20 * time.Minute
	cfg.Skew = 30 * time.Second
	cfg.DefaultWait = time.Minute
	cfg.MaxDelegations, cfg.MaxPerRequester = count+1, count+1
	n, err := homelock.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for !n.Status().Available {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
	keys := make([]string, count)
	for i := range keys {
		keys[i] = fmt.Sprintf("idle-%08d", i)
	}
	before := heapInUse()
	for _, k := range keys {
		h, err := n.Lock(ctx, k)
		if err != nil {
			return n, fmt.Errorf("idle delegation %s: %w", k, err)
		}
		_ = h.Unlock()
	}
	after := heapInUse()
	held := n.Stats().Held
	r.IdleDelegations = float64(held)
	if held > 0 {
		r.BytesPerIdleDelegation = float64(int64(after)-int64(before)) / float64(held)
	}
	return n, nil
}
