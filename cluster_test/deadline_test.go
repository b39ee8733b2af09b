package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/msg"
)

// deadlineSlack is what a Lock may take past its wait beyond one
// RetryInterval: the timer goroutine's wake-up on a loaded machine.
const deadlineSlack = 150 * time.Millisecond

// A Lock whose key's home is silent (its links paused: it neither answers
// nor refuses) ends when its wait does, whether WithWait or the context's
// deadline sets it, within RetryInterval and a little: a silent home never
// stretches a deadline.
func TestRealLockDeadlineSilentHome(t *testing.T) {
	c := newRCluster(t, 3, rcOptions{inmem: true})
	locker := c.nodes[0].node
	const wait = 300 * time.Millisecond
	c.mem.Pause(msg.NodeID(c.nodes[2].ID()))
	defer c.mem.Resume(msg.NodeID(c.nodes[2].ID()))
	for _, tc := range []struct {
		name string
		ctx  time.Duration // 0: no deadline
		opts []homelock.LockOption
	}{
		{"WithWait", 0, []homelock.LockOption{homelock.WithWait(wait)}},
		{"context deadline", wait, nil},
		{"context sooner than WithWait", wait, []homelock.LockOption{homelock.WithWait(10 * wait)}},
		{"TryLock WithWait", 0, []homelock.LockOption{homelock.WithWait(wait)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := c.keyHomedAt("n3", "silent-"+tc.name)
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			lock := locker.Lock
			if tc.name == "TryLock WithWait" {
				lock = locker.TryLock
			}
			start := time.Now()
			h, err := lock(ctx, key, tc.opts...)
			took := time.Since(start)
			if err == nil {
				_ = h.Unlock()
				t.Fatalf("granted %s with its home paused", key)
			}
			if !errors.Is(err, homelock.ErrTimeout) && !errors.Is(err, homelock.ErrLockUnavailable) {
				t.Fatalf("Lock: %v, want ErrTimeout or ErrLockUnavailable", err)
			}
			if took < wait-5*time.Millisecond || took > wait+rcRetry+deadlineSlack {
				t.Fatalf("a %v wait with a silent home took %v (%v)", wait, took, err)
			}
			t.Logf("%v wait, home silent: %v past it: %v", wait, (took - wait).Round(time.Millisecond), err)
		})
	}
}

// A home cut off from one node only (a partial partition: both still reach
// the third, so the cluster keeps every member) never answers that node. A
// Lock through it WithHomeSilence gives up as unavailable once the home has
// been silent that long, not at its wait, and the same key locks at once
// through the third node, which the lock command with several --node
// addresses asks next. A home that answers (the key held elsewhere) is
// waited for until the wait ends, silence or not.
func TestRealHomeSilenceGivesWay(t *testing.T) {
	c := newRCluster(t, 3, rcOptions{inmem: true})
	near, far, home := c.nodes[0], c.nodes[1], c.nodes[2]
	key := c.keyHomedAt(home.ID(), "cut-off-home")
	c.mem.Block(msg.NodeID(near.ID()), msg.NodeID(home.ID()))
	c.mem.Block(msg.NodeID(home.ID()), msg.NodeID(near.ID()))
	defer c.mem.Heal()

	const silence = 300 * time.Millisecond
	start := time.Now()
	h, err := near.node.Lock(context.Background(), key, homelock.WithWait(10*time.Second), homelock.WithHomeSilence(silence))
	took := time.Since(start)
	if err == nil {
		_ = h.Unlock()
		t.Fatalf("granted %s through a node its home cannot reach", key)
	}
	if !errors.Is(err, homelock.ErrLockUnavailable) || took < silence-5*time.Millisecond || took > silence+rcRetry+deadlineSlack {
		t.Fatalf("Lock through the cut-off node: %v after %v, want ErrLockUnavailable after %v", err, took, silence)
	}
	t.Logf("gave way after %v: %v", took.Round(time.Millisecond), err)

	h, err = far.node.Lock(context.Background(), key, homelock.WithWait(2*time.Second), homelock.WithHomeSilence(silence))
	if err != nil {
		t.Fatalf("Lock through the node that reaches the home: %v", err)
	}
	defer func() { _ = h.Unlock() }()

	// A home that answers: far's section holds the key, and a locker on the
	// home queues behind it, however long past its silence.
	const wait = time.Second
	start = time.Now()
	h2, err := home.node.Lock(context.Background(), key, homelock.WithWait(wait), homelock.WithHomeSilence(silence))
	took = time.Since(start)
	if err == nil {
		_ = h2.Unlock()
		t.Fatalf("granted %s while another section holds it", key)
	}
	if !errors.Is(err, homelock.ErrTimeout) || took < wait-5*time.Millisecond {
		t.Fatalf("Lock queued behind a holder: %v after %v, want ErrTimeout after its %v wait", err, took, wait)
	}
}
