package homelock

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/homelock/homelock/fence"
)

func TestGuardCollector(t *testing.T) {
	ctx := context.Background()
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ring := fence.NewKeyRing()
	if err := ring.Add("k1", bytes.Repeat([]byte{1}, 32)); err != nil {
		t.Fatal(err)
	}
	g, err := fence.NewGuard(db, ring, fence.GuardOptions{Prefix: []byte("f/"), DefaultMode: fence.ModeShadow})
	if err != nil {
		t.Fatal(err)
	}
	write := func(res, owner string, counter, seg uint64, op string) error {
		s, err := ring.Sign(fence.Grant{Resource: res, Owner: owner, RequestID: op, Lease: op, Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: counter},
			IssuerEpoch: 1, Domain: "d", TTL: time.Second, Operation: "w", Scope: fence.ScopeCluster})
		if err != nil {
			return err
		}
		_, err = g.Apply(ctx, fence.Mutation{Signed: s, Resource: res, Owner: owner, Operation: "w", OpID: op, Segment: seg}, nil)
		return err
	}
	if err := g.SetMode(ctx, "enforced", fence.ModeEnforce); err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"enforced", "shadowed"} {
		if err := write(res, "B", 2, 1, res+"-b"); err != nil {
			t.Fatal(err)
		}
	}
	if err := write("enforced", "A", 1, 1, "a"); !errors.Is(err, fence.ErrStaleOwner) {
		t.Fatalf("stale write to the enforced resource: %v", err)
	}
	if err := write("shadowed", "A", 1, 1, "a"); err != nil {
		t.Fatalf("stale write to the shadow resource: %v", err)
	}

	if err := write("enforced", "C", 3, 1, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Prune(ctx, "enforced", fence.Token{Epoch: 1, Incarnation: 1, Counter: 3}); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(NewGuardCollector(g, prometheus.Labels{"node": "n1"}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			k := f.GetName()
			for _, l := range m.Label {
				if l.GetName() != "node" {
					k += "," + l.GetName() + "=" + l.GetValue()
				}
			}
			got[k] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"homelock_fence_default_mode,mode=shadow":                                         1,
		"homelock_fence_accepted_total":                                                   3,
		"homelock_fence_receipts_pruned_total":                                            1,
		"homelock_fence_op_filter_rebuilds_total":                                         0,
		"homelock_fence_refused_total,reason=stale_owner":                                 1,
		"homelock_fence_would_refuse_total,reason=stale_owner":                            1,
		"homelock_fence_would_refuse_total,reason=bad_grant":                              0,
		"homelock_fence_resource_mode,mode=enforce,resource=enforced":                     1,
		"homelock_fence_resource_highest_fence,resource=enforced,token=e1.i1.c3":          1,
		"homelock_fence_resource_would_refuse_total,reason=stale_owner,resource=shadowed": 1,
		"homelock_fence_resource_mode,mode=shadow,resource=shadowed":                      1,
		"homelock_fence_resource_would_refuse_total,reason=stale_owner,resource=enforced": 0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	// The filter holds the three accepted operations' keys, the pruned one's
	// too until a rebuild: its load is theirs over its design load.
	st, err := g.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := got["homelock_fence_op_filter_load_ratio"]; v <= 0 || v != st.OpFilterLoad {
		t.Errorf("homelock_fence_op_filter_load_ratio = %v, want GuardStats.OpFilterLoad %v, above 0", v, st.OpFilterLoad)
	}
}
