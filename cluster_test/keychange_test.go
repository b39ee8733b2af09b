package clustertest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

// keyChangeRings are the ring files of docs/operations.md, "Changing the
// grant signing key", by step: the old key alone; the new one staged before
// it; the new one signing; the old one retired.
func keyChangeRings(t *testing.T) []func() *fence.KeyRing {
	b64 := base64.StdEncoding.EncodeToString
	old := fmt.Sprintf(`{"id": "k1", "secret": %q}`, b64([]byte("cluster-test-key-0123456789abcdef")))
	next := fmt.Sprintf(`{"id": "k2", "secret": %q}`, b64([]byte("cluster-test-key-2-0123456789abcd")))
	var out []func() *fence.KeyRing
	for _, keys := range []string{old, next + ", " + old, old + ", " + next, `{"id": "k1", "retired": true}, ` + next} {
		file := `{"keys": [` + keys + `]}`
		out = append(out, func() *fence.KeyRing {
			r, err := fence.ParseKeyRing([]byte(file))
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
	}
	return out
}

// TestRealGrantKeyChange runs the grant signing key change on a live
// cluster: three nodes, each with its own ring for the node and its KV's
// Guard, writers on every node on shared keys, and the steps as rolling
// clean restarts. The steps the docs give leave no write refused, local or
// replicated; restarting straight onto the signing ring (no staged step)
// has Guards refuse the new key's grants, which shows the check can fail.
func TestRealGrantKeyChange(t *testing.T) {
	if testing.Short() {
		t.Skip("rolling restarts")
	}
	rings := keyChangeRings(t)
	for _, tc := range []struct {
		name    string
		steps   []int // ring per pass of rolling restarts
		refused bool
	}{
		{"as documented", []int{1, 2, 2, 3}, false},
		{"no staged step", []int{2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// newRCluster's shared ring is step 0's (k1, the same secret);
			// each restart gives the node and its KV a ring of their own.
			c := newRCluster(t, 3, rcOptions{})
			var refused, written, other atomic.Int64
			var lastOther atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range c.nodes {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						c.mu.Lock()
						kv := c.nodes[i].kv
						c.mu.Unlock()
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						// Shared keys move between nodes; a node's own keys keep
						// their delegations for as long as it runs.
						key := fmt.Sprintf("key-%d", n%4)
						if n%2 == 1 {
							key = fmt.Sprintf("own-%d-%d", i, n%8)
						}
						_, _, committed, err := kv.Update(ctx, key, func(old []byte) []byte { return append(old[:0:0], 'x') })
						cancel()
						switch {
						case errors.Is(err, fence.ErrBadGrant):
							refused.Add(1)
						case err != nil:
							other.Add(1) // a node closed for its restart, a lock that waited too long
							lastOther.Store(err.Error())
							time.Sleep(20 * time.Millisecond)
						case committed:
							written.Add(1)
						}
					}
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var replicaRefused uint64
			for _, step := range tc.steps {
				for i := range c.nodes {
					_, _, ref := c.restartWithRing(ctx, i, rings[step]()).ReplicaStats()
					replicaRefused += ref
				}
			}
			time.Sleep(500 * time.Millisecond)
			close(stop)
			wg.Wait()
			c.settle(10 * time.Second)
			for _, r := range c.nodes {
				_, _, ref := r.kv.ReplicaStats()
				replicaRefused += ref
			}
			t.Logf("%d writes, %d refused by the writer's own Guard, %d replicated writes refused, %d other errors (last: %v)",
				written.Load(), refused.Load(), replicaRefused, other.Load(), lastOther.Load())
			if written.Load() == 0 {
				t.Fatal("no write went through")
			}
			if got := refused.Load() > 0 || replicaRefused > 0; got != tc.refused {
				t.Fatalf("grants refused: %v, want %v", got, tc.refused)
			}
		})
	}
}

// restartWithRing closes node i cleanly (it leaves, its keys move), closes
// its KV, and opens both again on their directories with ring. It returns
// the closed KV, whose counts a new one does not carry on.
func (c *rcluster) restartWithRing(ctx context.Context, i int, ring *fence.KeyRing) *KV {
	c.t.Helper()
	r := c.nodes[i]
	closed := r.kv
	if err := r.node.Close(ctx); err != nil {
		c.t.Fatalf("close %s: %v", r.ID(), err)
	}
	if err := r.kv.Close(); err != nil {
		c.t.Fatalf("close %s's KV: %v", r.ID(), err)
	}
	cfg := r.cfg
	cfg.KeyRing = ring
	kv := c.openKV(cfg)
	c.hook(&cfg, kv)
	c.mu.Lock()
	r.cfg, r.kv = cfg, kv
	c.mu.Unlock()
	c.reopen(ctx, i)
	c.waitAvailable(20 * time.Second)
	return closed
}
