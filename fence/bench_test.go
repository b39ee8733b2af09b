package fence

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkGuardApply states the Guard's cost as what it adds to a plain
// synced batch commit of the same business write. Each iteration does one of
// each, on two Pebbles of one kind, and times both: on a shared machine only
// measures taken side by side compare. It reports the p50 of each, their
// difference (added-p50-ns, the number the Guard is held to) and the
// difference of the means, which memtable flushes and compactions of the
// Guard's larger batches weigh on.
//
// "hit" is the steady state: the resource's records are cached and the
// operation filter proves each new operation ID unused. "cold" turns both
// off, so every write reads the resource state and looks up its operation ID
// in Pebble, as a write to a resource not touched for a while does.
// "handoff" is "hit" with a new grant for every write, as a key that changes
// hands at every write (the harness's hot key) brings each replica's Guard:
// every write verifies a MAC and fills a verified-grant slot.
//
// The variants run on Pebble's in-memory FS (where the Guard's CPU cost
// shows), with and without Bloom filters on every level (a cold lookup of an
// absent operation ID reads a block of every sstable without them), and on a
// real directory (where fsync dominates).
func BenchmarkGuardApply(b *testing.B) {
	for _, c := range []struct {
		name    string
		disk    bool
		filters bool
	}{{"mem", false, false}, {"mem-bloom", false, true}, {"disk-bloom", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			for _, path := range []string{"hit", "cold", "handoff"} {
				b.Run(path, func(b *testing.B) {
					opts := GuardOptions{Prefix: []byte(testPrefix), Domain: "cluster-a"}
					if path == "cold" {
						opts.CacheResources, opts.OpIndexBytes = -1, -1
					}
					benchGuardApply(b, benchDB(b, c.disk, c.filters), benchDB(b, c.disk, c.filters), opts, path == "handoff")
				})
			}
		})
	}
}

func benchDB(b *testing.B, disk, filters bool) *pebble.DB {
	fs, dir := vfs.FS(vfs.NewMem()), "db"
	if disk {
		fs, dir = vfs.Default, b.TempDir()
	}
	o := &pebble.Options{FS: fs, Logger: quietLogger{}}
	if filters {
		UseBloomFilters(o)
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

var benchPayload = []byte("invoice 2026-07-19 line 0042: 1299.00 EUR settled by worker-settlement-7; batch 91 of 120......")

// benchGrants is how many grants the handoff path signs ahead, cycled.
const benchGrants = 1 << 14

func benchGuardApply(b *testing.B, plainDB, guardDB *pebble.DB, opts GuardOptions, handoff bool) {
	ring := newRing(b)
	g, err := NewGuard(guardDB, ring, opts)
	if err != nil {
		b.Fatal(err)
	}
	signed, _ := ring.Sign(baseGrant(res, "worker-settlement-7", tok(37, 2, 8842)))
	// The handoff path's grants are signed ahead, benchGrants at a time
	// under ever higher incarnations, outside the timed writes.
	grants := make([][]byte, benchGrants)
	signAhead := func(round uint64) {
		for i := range grants {
			s, err := ring.Sign(baseGrant(res, "worker-settlement-7", tok(37, 3+round, uint64(i+1))))
			if err != nil {
				b.Fatal(err)
			}
			grants[i] = s
		}
	}
	ctx := context.Background()
	key := []byte("biz/" + res)
	m := Mutation{Signed: signed, Resource: res, Owner: "worker-settlement-7", Operation: "write", Payload: benchPayload}
	stage := func(bt *pebble.Batch) error { return bt.Set(key, benchPayload, nil) }
	var plain, guard []int64
	seg := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		seg++
		if handoff && (seg-1)%benchGrants == 0 {
			signAhead((seg - 1) / benchGrants)
		}
		t0 := time.Now()
		bt := plainDB.NewBatch()
		if err := bt.Set(key, benchPayload, nil); err != nil {
			b.Fatal(err)
		}
		if err := bt.Commit(pebble.Sync); err != nil {
			b.Fatal(err)
		}
		bt.Close()
		t1 := time.Now()
		m.Segment = seg
		if handoff {
			m.Signed, m.Segment = grants[(seg-1)%benchGrants], 1
		}
		m.OpID = fmt.Sprintf("op-%d", seg)
		if _, err := g.Apply(ctx, m, stage); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		plain = append(plain, t1.Sub(t0).Nanoseconds())
		guard = append(guard, t2.Sub(t1).Nanoseconds())
	}
	b.ReportMetric(mean(guard)-mean(plain), "added-mean-ns")
	p, q := p50(plain), p50(guard)
	b.ReportMetric(p, "plain-p50-ns")
	b.ReportMetric(q, "guard-p50-ns")
	b.ReportMetric(q-p, "added-p50-ns")
}

func p50(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return float64(xs[len(xs)/2])
}

func mean(xs []int64) float64 {
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	return sum / float64(max(1, len(xs)))
}

// BenchmarkGuardPrune is what Prune costs a receipt: each iteration writes
// pruneBenchWrites segments under one grant through the Guard (untimed),
// then prunes them all below the next fence, on Pebble's in-memory FS with
// Bloom filters. It reports ns/receipt; Prune is not on a write's path, and
// its cost per receipt is what a store's pruning takes from its writes.
func BenchmarkGuardPrune(b *testing.B) {
	ring := newRing(b)
	g, err := NewGuard(benchDB(b, false, true), ring, GuardOptions{Prefix: []byte(testPrefix), Domain: "cluster-a"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key := []byte("biz/" + res)
	stage := func(bt *pebble.Batch) error { return bt.Set(key, benchPayload, nil) }
	var pruned int
	var counter uint64
	for b.Loop() {
		b.StopTimer()
		counter++
		signed, _ := ring.Sign(baseGrant(res, "worker-settlement-7", tok(37, 2, counter)))
		for seg := uint64(1); seg <= pruneBenchWrites; seg++ {
			m := Mutation{Signed: signed, Resource: res, Owner: "worker-settlement-7", Operation: "write",
				OpID: fmt.Sprintf("op-%d-%d", counter, seg), Segment: seg, Payload: benchPayload}
			if _, err := g.Apply(ctx, m, stage); err != nil {
				b.Fatal(err)
			}
		}
		next, _ := ring.Sign(baseGrant(res, "worker-settlement-7", tok(37, 2, counter+1)))
		if _, err := g.Apply(ctx, Mutation{Signed: next, Resource: res, Owner: "worker-settlement-7", Operation: "write",
			OpID: fmt.Sprintf("op-%d-fence", counter), Segment: 1, Payload: benchPayload}, stage); err != nil {
			b.Fatal(err)
		}
		counter++
		b.StartTimer()
		n, err := g.Prune(ctx, res, tok(37, 2, counter))
		if err != nil {
			b.Fatal(err)
		}
		pruned += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(1, pruned)), "ns/receipt")
}

// pruneBenchWrites is how many receipts each BenchmarkGuardPrune iteration
// prunes (besides the fence write before the next iteration's).
const pruneBenchWrites = 2000

// BenchmarkGuardApplyPruned is a long-running store's write: a resource
// written prunedBenchSegments segments a fence, pruned below each new fence
// as the example store does, after the Guard has taken four times its
// operation filter's design load (a 64 KiB filter, 53,000 IDs: the default's
// 2 MiB, 1.7 million IDs, would take minutes to fill). Without the filter's
// rebuild the pruned IDs stay in it and most new IDs cost a point read; with
// it the filter holds about what the store keeps. It reports ns/op (one
// Apply, and its share of the Prunes) and the filter's load at the end.
func BenchmarkGuardApplyPruned(b *testing.B) {
	ring := newRing(b)
	const filterBytes = 64 << 10
	g, err := NewGuard(benchDB(b, false, true), ring, GuardOptions{Prefix: []byte(testPrefix), Domain: "cluster-a", OpIndexBytes: filterBytes})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key := []byte("biz/" + res)
	stage := func(bt *pebble.Batch) error { return bt.Set(key, benchPayload, nil) }
	m := Mutation{Resource: res, Owner: "worker-settlement-7", Operation: "write", Payload: benchPayload}
	var n uint64
	write := func() {
		if n%prunedBenchSegments == 0 {
			fence := n/prunedBenchSegments + 1
			m.Signed, _ = ring.Sign(baseGrant(res, m.Owner, tok(37, 2, fence)))
			if fence > 1 {
				if _, err := g.Prune(ctx, res, tok(37, 2, fence-1)); err != nil {
					b.Fatal(err)
				}
			}
		}
		m.Segment, m.OpID = n%prunedBenchSegments+1, fmt.Sprintf("op-%d", n)
		if _, err := g.Apply(ctx, m, stage); err != nil {
			b.Fatal(err)
		}
		n++
	}
	for range 4 * (filterBytes * 8 * 10 / 98) {
		write()
	}
	for b.Loop() {
		write()
	}
	s, err := g.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(s.OpFilterLoad, "filter-load")
}

// prunedBenchSegments is how many writes BenchmarkGuardApplyPruned makes
// under each fence.
const prunedBenchSegments = 1024
