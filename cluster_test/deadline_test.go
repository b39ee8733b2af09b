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
