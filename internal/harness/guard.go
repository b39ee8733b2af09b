package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/homelock/homelock/fence"
)

// guardResult is what the fence costs a store: synced writes through a
// fence.Guard against the same writes without one.
type guardResult struct {
	plainPerS, guardPerS float64
	// addedUsP50 is the p50 of a write through the Guard minus the p50 of a
	// plain one.
	addedUsP50 float64
}

// guardPhase measures the Guard's cost in its own directory (removed when
// it ends).
func guardPhase(ctx context.Context, e *env) error {
	g, err := guardWrites(ctx, e.wd.sub(fmt.Sprintf("guard-%d", e.round)), e.o.short())
	if err != nil {
		return err
	}
	e.r.record("guard_plain_writes_per_s", g.plainPerS)
	e.r.record("guard_writes_per_s", g.guardPerS)
	e.r.record("guard_added_us_p50", g.addedUsP50)
	return nil
}

// guardResources is how many resources the Guard phase writes round robin:
// a store fences each of its keys, so the writes are spread, not one long
// segment run.
const guardResources = 256

// guardWrites measures synced business writes to two Pebbles in dir, one
// plain and one through a Guard, for about d and at most storeMaxWrites
// writes (the footprint bound storeWrites explains): each iteration writes
// once to each and times both, so that the shared machine's noise falls on
// both alike. Writes per second count only the time spent in each kind of
// write. dir is removed when it ends.
func guardWrites(ctx context.Context, dir string, d time.Duration) (guardResult, error) {
	defer os.RemoveAll(dir)
	var out guardResult
	open := func(name string) (*pebble.DB, error) {
		return pebble.Open(filepath.Join(dir, name), fence.UseBloomFilters(&pebble.Options{Logger: quiet{}, MemTableSize: storeMemTable, FS: noPrealloc{vfs.Default}}))
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
	plainHist, guardHist := newHist(), newHist()
	var plainTime, guardTime time.Duration
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end) && n < storeMaxWrites; n++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res := fmt.Sprintf("k%d", n%guardResources)
		key := []byte("v/" + res)
		opID := fmt.Sprintf("n1/%d", n) // the caller's, not the Guard's, cost
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
			OpID: opID, Segment: uint64(n/guardResources + 1), Payload: val,
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
	out.plainPerS = float64(n) / plainTime.Seconds()
	out.guardPerS = float64(n) / guardTime.Seconds()
	out.addedUsP50 = float64(guardHist.ValueAtQuantile(50)-plainHist.ValueAtQuantile(50)) / 1e3
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

// countWouldRefuse runs phase and records, as hot_key_would_refuse, the
// shadow-mode would-refuse count it added: 0 on a correct run, where the
// lock never let a stale writer reach a store.
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
	r.record("hot_key_would_refuse", float64(after-before))
	return nil
}
