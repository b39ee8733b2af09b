package fence

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The Guard's cost is stated as the difference between BenchmarkGuardApply
// and BenchmarkPlainBatchCommit: the same synced business write, with and
// without verification and fence records. Both run on Pebble's in-memory FS
// (where the Guard's CPU cost shows) and on a real directory (where fsync
// dominates).

// The Guard looks up the operation index for every new operation ID, a key
// that is not there; without Bloom filters Pebble reads a block of every
// sstable it could be in. The "bloom" variants configure filters on every
// level, as a store embedding the Guard should.
func benchDBs(b *testing.B, run func(b *testing.B, db *pebble.DB)) {
	open := func(b *testing.B, fs vfs.FS, dir string, filters bool) *pebble.DB {
		o := &pebble.Options{FS: fs, Logger: quietLogger{}}
		if filters {
			UseBloomFilters(o)
		}
		db, err := pebble.Open(dir, o)
		if err != nil {
			b.Fatal(err)
		}
		return db
	}
	for _, c := range []struct {
		name    string
		disk    bool
		filters bool
	}{{"mem", false, false}, {"mem-bloom", false, true}, {"disk", true, false}, {"disk-bloom", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			fs, dir := vfs.FS(vfs.NewMem()), "db"
			if c.disk {
				fs, dir = vfs.Default, b.TempDir()
			}
			db := open(b, fs, dir, c.filters)
			defer db.Close()
			run(b, db)
		})
	}
}

var benchPayload = []byte("invoice 2026-07-19 line 0042: 1299.00 EUR settled by worker-settlement-7; batch 91 of 120......")

func BenchmarkGuardApply(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *pebble.DB) {
		ring := newRing(b)
		g, err := NewGuard(db, ring, GuardOptions{Prefix: []byte(testPrefix), Domain: "cluster-a"})
		if err != nil {
			b.Fatal(err)
		}
		signed, _ := ring.Sign(baseGrant(res, "worker-settlement-7", tok(37, 2, 8842)))
		ctx := context.Background()
		key := []byte("biz/" + res)
		m := Mutation{Signed: signed, Resource: res, Owner: "worker-settlement-7", Operation: "write", Payload: benchPayload}
		stage := func(bt *pebble.Batch) error { return bt.Set(key, benchPayload, nil) }
		seg := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			seg++
			m.Segment = seg
			m.OpID = fmt.Sprintf("op-%d", seg)
			if _, err := g.Apply(ctx, m, stage); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPlainBatchCommit(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *pebble.DB) {
		key := []byte("biz/" + res)
		seg := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			seg++
			_ = fmt.Sprintf("op-%d", seg) // the same per-write cost the Guard benchmark pays
			bt := db.NewBatch()
			if err := bt.Set(key, benchPayload, nil); err != nil {
				b.Fatal(err)
			}
			if err := bt.Commit(pebble.Sync); err != nil {
				b.Fatal(err)
			}
			bt.Close()
		}
	})
}
