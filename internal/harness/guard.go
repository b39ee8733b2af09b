package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/homelock/homelock/fence"
)

// GuardReport is what the fence costs a store and what it saw: synced
// writes through a fence.Guard against the same writes without one, and the
// writes the cluster's Guards, in shadow mode, would have refused while the
// hot key changed hands (0 on a correct run: the lock never let a stale
// writer reach the store).
type GuardReport struct {
	PlainWritesPerS float64 `json:"plain_writes_per_s"`
	WritesPerS      float64 `json:"writes_per_s"`
	// AddedUsP50 is the p50 of a write through the Guard minus the p50 of a
	// plain one.
	AddedUsP50 float64 `json:"added_us_p50"`
	// HotKeyWouldRefuse sums, over every node's store, the shadow-mode
	// would-refuse counts of the hot-key phase.
	HotKeyWouldRefuse float64 `json:"hot_key_would_refuse"`
}

func unmeasuredGuard() GuardReport { return GuardReport{-1, -1, -1, -1} }

func (r *Report) guardTargets() []target {
	le := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	return []target{
		{"synced writes, plain", "/s", r.Guard.PlainWritesPerS, "", nil},
		{"synced writes through Guard", "/s", r.Guard.WritesPerS, "", nil},
		{"Guard added per write p50", "µs", r.Guard.AddedUsP50, "≤ 5", le(5)},
		{"hot key: would-refuse (shadow)", "", r.Guard.HotKeyWouldRefuse, "0", le(0)},
	}
}

// guardResources is how many resources the Guard phase writes round robin:
// a store fences each of its keys, so the writes are spread, not one long
// segment run.
const guardResources = 256

// guardWrites measures synced business writes to two Pebbles in dir, one
// plain and one through a Guard, for about d: each iteration writes once to
// each and times both, so that the shared machine's noise falls on both
// alike. Writes per second count only the time spent in each kind of write.
func guardWrites(dir string, d time.Duration) (GuardReport, error) {
	out := unmeasuredGuard()
	open := func(name string) (*pebble.DB, error) {
		return pebble.Open(filepath.Join(dir, name), fence.UseBloomFilters(&pebble.Options{Logger: quiet{}}))
	}
	plain, err := open("plain")
	if err != nil {
		return out, err
	}
	defer plain.Close()
	db, err := open("guard")
	if err != nil {
		return out, err
	}
	defer db.Close()
	ring := fence.NewKeyRing()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return out, err
	}
	if err := ring.Add("guard-1", secret); err != nil {
		return out, err
	}
	g, err := fence.NewGuard(db, ring, fence.GuardOptions{Prefix: []byte("\x00fence/"), Domain: "harness"})
	if err != nil {
		return out, err
	}
	grants := make([][]byte, guardResources)
	for i := range grants {
		grants[i], err = ring.Sign(fence.Grant{
			Resource: fmt.Sprintf("k%d", i), Owner: "n1", RequestID: fmt.Sprintf("req-%d", i), Lease: fmt.Sprintf("lease-%d", i),
			Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: uint64(i + 1)}, IssuerEpoch: 1, Domain: "harness",
			TTL: 5 * time.Second, Operation: operation, Scope: fence.ScopeCluster,
		})
		if err != nil {
			return out, err
		}
	}
	val := make([]byte, 64)
	ctx := context.Background()
	plainHist, guardHist := newHist(), newHist()
	var plainTime, guardTime time.Duration
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		res := fmt.Sprintf("k%d", n%guardResources)
		key := []byte("v/" + res)
		t0 := time.Now()
		b := plain.NewBatch()
		err := b.Set(key, val, nil)
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		b.Close()
		if err != nil {
			return out, err
		}
		t1 := time.Now()
		_, err = g.Apply(ctx, fence.Mutation{
			Signed: grants[n%guardResources], Resource: res, Owner: "n1", Operation: operation,
			OpID: fmt.Sprintf("n1/%d", n), Segment: uint64(n/guardResources + 1), Payload: val,
		}, func(b *pebble.Batch) error { return b.Set(key, val, nil) })
		if err != nil {
			return out, err
		}
		t2 := time.Now()
		plainTime += t1.Sub(t0)
		guardTime += t2.Sub(t1)
		_ = plainHist.RecordValue(max(1, t1.Sub(t0).Nanoseconds()))
		_ = guardHist.RecordValue(max(1, t2.Sub(t1).Nanoseconds()))
	}
	out.PlainWritesPerS = float64(n) / plainTime.Seconds()
	out.WritesPerS = float64(n) / guardTime.Seconds()
	out.AddedUsP50 = float64(guardHist.ValueAtQuantile(50)-plainHist.ValueAtQuantile(50)) / 1e3
	return out, nil
}

// wouldRefuse sums the shadow-mode would-refuse counts of every node's
// store since it opened.
func (c *cluster) wouldRefuse(ctx context.Context) (uint64, error) {
	var n uint64
	for _, kv := range c.kvs {
		if kv == nil {
			continue
		}
		s, err := kv.Guard().Stats(ctx)
		if err != nil {
			return 0, err
		}
		n += s.WouldRefuse.Total()
	}
	return n, nil
}

// countWouldRefuse runs phase and records the would-refuse count it added.
func (c *cluster) countWouldRefuse(ctx context.Context, r *Report, phase func() error) error {
	before, err := c.wouldRefuse(ctx)
	if err != nil {
		return err
	}
	if err := phase(); err != nil {
		return err
	}
	after, err := c.wouldRefuse(ctx)
	if err != nil {
		return err
	}
	r.Guard.HotKeyWouldRefuse = float64(after - before)
	return nil
}
