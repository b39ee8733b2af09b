package harness

import (
	"context"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/homelock/homelock/fence"
)

func TestGuardWrites(t *testing.T) {
	g, err := guardWrites(t.TempDir(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plain %.0f writes/s, through the Guard %.0f writes/s, added p50 %.1f µs", g.PlainWritesPerS, g.WritesPerS, g.AddedUsP50)
	if g.PlainWritesPerS <= 0 || g.WritesPerS <= 0 || g.AddedUsP50 == -1 {
		t.Fatalf("not measured: %+v", g)
	}
	if g.HotKeyWouldRefuse != -1 {
		t.Fatalf("hot key would-refuse set by the write phase: %+v", g)
	}
}

// The hot-key phase on a small cluster: the shadow-mode Guards would refuse
// nothing, and the count does see a stale write when one reaches a store.
func TestHotKeyWouldRefuse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startCluster(ctx, t.TempDir(), 3)
	if c != nil {
		defer c.close()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{latencies: map[string]*hdr.Histogram{}}
	setUnmeasured(r)
	if err := c.countWouldRefuse(ctx, r, func() error { return c.hotKey(ctx, r, time.Second, 2) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("hot key: %.0f updates/s, %.0f handoffs/s, would-refuse %.0f, lost %.0f", r.HotKeyUpdatesPerS, r.HotKeyHandoffsPerS, r.Guard.HotKeyWouldRefuse, r.HotKeyLostUpdates)
	if r.HotKeyUpdatesPerS <= 0 {
		t.Fatal("no updates")
	}
	if r.Guard.HotKeyWouldRefuse != 0 || r.HotKeyLostUpdates != 0 {
		t.Fatalf("would-refuse %.0f, lost updates %.0f: want 0", r.Guard.HotKeyWouldRefuse, r.HotKeyLostUpdates)
	}

	// A writer with a token below the hot key's highest: committed in
	// shadow mode, and counted.
	if err := c.countWouldRefuse(ctx, r, func() error {
		stale, err := c.keys.Sign(fence.Grant{
			Resource: "hot", Owner: c.cfgs[0].NodeID, RequestID: "stale", Lease: "stale",
			Token: fence.Token{Epoch: 1, Incarnation: 0, Counter: 1}, IssuerEpoch: 1, Domain: c.cfgs[0].ClusterID,
			TTL: time.Second, Operation: operation, Scope: fence.ScopeCluster,
		})
		if err != nil {
			return err
		}
		rc, err := c.kvs[0].Guard().Apply(ctx, fence.Mutation{
			Signed: stale, Resource: "hot", Owner: c.cfgs[0].NodeID, Operation: operation, OpID: "stale", Segment: 1,
		}, nil)
		if err == nil && rc.WouldRefuse != fence.ReasonStaleOwner {
			t.Errorf("stale write: would-refuse %s, want stale_owner", rc.WouldRefuse)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r.Guard.HotKeyWouldRefuse != 1 {
		t.Fatalf("a stale write counted %.0f times, want 1", r.Guard.HotKeyWouldRefuse)
	}
}
