package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

func TestGuardWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "guard")
	g, err := guardWrites(context.Background(), dir, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plain %.0f writes/s, through the Guard %.0f writes/s, added p50 %.1f µs", g.plainPerS, g.guardPerS, g.addedUsP50)
	if g.plainPerS <= 0 || g.guardPerS <= 0 {
		t.Fatalf("not measured: %+v", g)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the phase left its directory behind: %v", err)
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
	c, err := startCluster(ctx, t.TempDir(), 3, nil)
	if c != nil {
		defer c.close()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := newReport()
	last := func(key string) float64 {
		v := r.runs[key]
		if len(v) == 0 {
			t.Fatalf("%s not recorded", key)
		}
		return v[len(v)-1]
	}
	if err := c.countWouldRefuse(ctx, r, func() error { return c.hotKey(ctx, r, "hot", time.Second, 2) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("hot key: %.0f updates/s, %.0f handoffs/s, would-refuse %.0f, lost %.0f",
		last("hot_key_updates_per_s"), last("hot_key_handoffs_per_s"), last("hot_key_would_refuse"), last("hot_key_lost_updates"))
	if last("hot_key_updates_per_s") <= 0 {
		t.Fatal("no updates")
	}
	if last("hot_key_would_refuse") != 0 || last("hot_key_lost_updates") != 0 {
		t.Fatalf("would-refuse %.0f, lost updates %.0f: want 0", last("hot_key_would_refuse"), last("hot_key_lost_updates"))
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
	if v := last("hot_key_would_refuse"); v != 1 {
		t.Fatalf("a stale write counted %.0f times, want 1", v)
	}
}
