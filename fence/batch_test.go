package fence

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// batchStage is fixture.apply's stage as a BatchItem's.
func batchStage(m Mutation) func(b *pebble.Batch) error {
	return func(b *pebble.Batch) error {
		if err := b.Set(bizKey(m.Resource, m.OpID), m.Payload, nil); err != nil {
			return err
		}
		return b.Set([]byte("biz/"+m.Resource), m.Payload, nil)
	}
}

// randomBatches is a schedule of batches over a few resources: rising and
// stale tokens, segments in and out of order, resends with the same and
// another payload, operation IDs taken again, grants for another resource
// or owner, and a resource named twice in one batch now and then.
func randomBatches(f *fixture, seed uint64) [][]Mutation {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const resources = 5
	counter := make([]uint64, resources)
	seg := make([]uint64, resources)
	var sent []Mutation
	var out [][]Mutation
	for range 12 {
		var batch []Mutation
		for range 1 + rng.IntN(6) {
			r := rng.IntN(resources)
			res := fmt.Sprintf("r%d", r)
			var m Mutation
			switch p := rng.IntN(20); {
			case p < 2 && len(sent) > 0: // a resend, same or other payload
				m = sent[rng.IntN(len(sent))]
				if rng.IntN(2) == 0 {
					m.Payload = []byte("other")
				}
			case p < 5: // a new fence
				counter[r] += 1 + uint64(rng.IntN(2))
				seg[r] = 1
				m = mut(f.grant(res, "w", tok(1, 1, counter[r])), res, "w", fmt.Sprintf("op%d", rng.IntN(40)), seg[r], fmt.Sprintf("v%d", rng.IntN(1000)))
			case p < 7: // a stale fence
				m = mut(f.grant(res, "w", tok(1, 1, counter[r]/2)), res, "w", fmt.Sprintf("op%d", rng.IntN(40)), 1, "stale")
			case p < 8: // a grant for another resource
				m = mut(f.grant("elsewhere", "w", tok(1, 1, counter[r]+1)), res, "w", fmt.Sprintf("op%d", rng.IntN(40)), 1, "x")
			case p < 9: // a segment out of order
				m = mut(f.grant(res, "w", tok(1, 1, counter[r])), res, "w", fmt.Sprintf("op%d", rng.IntN(40)), seg[r]+2, "gap")
			default: // the next segment
				if counter[r] == 0 {
					counter[r] = 1
				}
				seg[r]++
				m = mut(f.grant(res, "w", tok(1, 1, counter[r])), res, "w", fmt.Sprintf("op%d", rng.IntN(40)), seg[r], fmt.Sprintf("v%d", rng.IntN(1000)))
			}
			sent = append(sent, m)
			batch = append(batch, m)
		}
		out = append(out, batch)
	}
	return out
}

// sameOutcome reports whether two results of one mutation agree: both
// accepted with equal receipts, or both refused with the same error.
func sameOutcome(rc1 Receipt, err1 error, rc2 Receipt, err2 error) bool {
	if (err1 == nil) != (err2 == nil) {
		return false
	}
	if err1 != nil {
		return err1.Error() == err2.Error()
	}
	return rc1 == rc2
}

// checkBatchMatchesApply runs one schedule through ApplyBatch on one Guard
// and item by item through Apply on another: every item's outcome and the
// stored state must agree, but for a resource named twice in a batch,
// which ApplyBatch refuses (and Apply is not asked).
// It returns how many items were accepted and refused.
func checkBatchMatchesApply(t *testing.T, seed uint64) (accepted, refused int) {
	one, many := newFixture(t, GuardOptions{}), newFixture(t, GuardOptions{})
	ctx := context.Background()
	for bi, batch := range randomBatches(many, seed) {
		items := make([]BatchItem, len(batch))
		for i, m := range batch {
			items[i] = BatchItem{Mutation: m, Stage: batchStage(m)}
		}
		rcs, errs := many.g.ApplyBatch(ctx, items)
		named := map[string]bool{}
		for i, m := range batch {
			if named[m.Resource] {
				must.ErrorIs(t, errs[i], ErrBadMutation, "seed %d batch %d item %d: a resource named twice", seed, bi, i)
				continue
			}
			named[m.Resource] = true
			rc, err := one.apply(m)
			if !sameOutcome(rc, err, rcs[i], errs[i]) {
				t.Fatalf("seed %d batch %d item %d (%s segment %d op %s): Apply gave %+v, %v; ApplyBatch gave %+v, %v\nreplay: go test ./fence -run TestApplyBatchMatchesApply -fence.batchseed %d",
					seed, bi, i, m.Resource, m.Segment, m.OpID, rc, err, rcs[i], errs[i], seed)
			}
			if err == nil {
				accepted++
			} else {
				refused++
			}
		}
		if string(dump(t, one.db, one.g.prefix)) != string(dump(t, many.db, many.g.prefix)) {
			t.Fatalf("seed %d batch %d: stored state differs between Apply and ApplyBatch", seed, bi)
		}
	}
	return accepted, refused
}

var batchSeed = flag.Uint64("fence.batchseed", 0, "run TestApplyBatchMatchesApply on this seed alone")

// TestApplyBatchMatchesApply: ApplyBatch decides each item as Apply would
// and stores the same records, over random schedules.
func TestApplyBatchMatchesApply(t *testing.T) {
	if *batchSeed != 0 {
		checkBatchMatchesApply(t, *batchSeed)
		return
	}
	var accepted, refused int
	for seed := uint64(1); seed <= 200; seed++ {
		a, r := checkBatchMatchesApply(t, seed)
		accepted, refused = accepted+a, refused+r
	}
	// The schedules must exercise both outcomes, or agreeing proves little.
	must.True(t, accepted > 1000 && refused > 1000, "accepted %d, refused %d", accepted, refused)
	t.Logf("200 schedules: %d items accepted, %d refused, alike", accepted, refused)
}

// FuzzApplyBatchMatchesApply searches schedules for an item ApplyBatch
// decides or stores otherwise than Apply.
func FuzzApplyBatchMatchesApply(f *testing.F) {
	for _, s := range []uint64{1, 7, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { _, _ = checkBatchMatchesApply(t, seed) })
}

// syncCounter counts the syncs of every file of an FS.
type syncCounter struct {
	vfs.FS
	n *atomic.Int64
}

func (fs syncCounter) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return countedFile{f, fs.n}, err
}

func (fs syncCounter) ReuseForWrite(old, new string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, new, c)
	return countedFile{f, fs.n}, err
}

type countedFile struct {
	vfs.File
	n *atomic.Int64
}

func (f countedFile) Sync() error                    { f.n.Add(1); return f.File.Sync() }
func (f countedFile) SyncData() error                { f.n.Add(1); return f.File.SyncData() }
func (f countedFile) SyncTo(off int64) (bool, error) { f.n.Add(1); return f.File.SyncTo(off) }

// TestApplyBatchSyncsOnce: eight writes to eight resources in one batch
// are one synced commit; through Apply they are eight.
func TestApplyBatchSyncsOnce(t *testing.T) {
	var syncs atomic.Int64
	db := openPebble(t, syncCounter{vfs.NewMem(), &syncs}, "db")
	t.Cleanup(func() { db.Close() })
	f := &fixture{t: t, db: db, ring: newRing(t)}
	g, err := NewGuard(db, f.ring, GuardOptions{Prefix: []byte(testPrefix)})
	must.NoError(t, err)
	f.g = g
	ctx := context.Background()
	var items []BatchItem
	for r := range 8 {
		res := fmt.Sprintf("r%d", r)
		m := mut(f.grant(res, "w", tok(1, 1, 1)), res, "w", "op1", 1, "a")
		items = append(items, BatchItem{Mutation: m, Stage: batchStage(m)})
	}
	before := syncs.Load()
	_, errs := g.ApplyBatch(ctx, items)
	for i, err := range errs {
		must.NoError(t, err, "item %d", i)
	}
	must.Equal(t, int64(1), syncs.Load()-before, "syncs of one batch of eight")
	before = syncs.Load()
	for r := range 8 {
		res := fmt.Sprintf("r%d", r)
		f.accepted(mut(f.grant(res, "w", tok(1, 1, 1)), res, "w", "op2", 2, "b"))
	}
	must.Equal(t, int64(8), syncs.Load()-before, "syncs of eight Applies")
	must.Equal(t, "b", f.value("biz/r7"))
}

// TestApplyBatchStageFailsAlone: an item whose stage fails after writing is
// refused with its error, nothing it staged is stored, and the others commit.
func TestApplyBatchStageFailsAlone(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	boom := errors.New("boom")
	var items []BatchItem
	for r := range 3 {
		res := fmt.Sprintf("r%d", r)
		m := mut(f.grant(res, "w", tok(1, 1, 1)), res, "w", "op1", 1, "a")
		items = append(items, BatchItem{Mutation: m, Stage: batchStage(m)})
	}
	items[1].Stage = func(b *pebble.Batch) error {
		if err := b.Set([]byte("biz/r1"), []byte("half"), nil); err != nil {
			return err
		}
		return boom
	}
	rcs, errs := f.g.ApplyBatch(context.Background(), items)
	must.NoError(t, errs[0])
	must.ErrorIs(t, errs[1], boom)
	must.NoError(t, errs[2])
	must.Equal(t, uint64(1), rcs[2].Seq)
	must.Equal(t, "a", f.value("biz/r0"))
	must.Equal(t, "a", f.value("biz/r2"))
	_, ok, err := f.g.get([]byte("biz/r1"))
	must.NoError(t, err)
	must.False(t, ok, "the failed stage's write was stored")
	must.Equal(t, Token{}, f.highest("r1"))
	// The refused item is judged afresh, as if it had never come.
	f.accepted(items[1].Mutation)
}

// TestApplyBatchBounds: past MaxBatchItems, items are refused, and the
// ones within the bound are applied.
func TestApplyBatchBounds(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	items := make([]BatchItem, MaxBatchItems+2)
	signed := f.grant("r", "w", tok(1, 1, 1))
	for i := range items {
		res := fmt.Sprintf("r%d", i)
		if i == 0 {
			res = "r"
		}
		items[i] = BatchItem{Mutation: mut(signed, res, "w", "op", 1, "a")}
	}
	_, errs := f.g.ApplyBatch(context.Background(), items)
	must.NoError(t, errs[0])
	must.ErrorIs(t, errs[1], ErrBadGrant) // a grant for r presented for r1
	must.ErrorIs(t, errs[MaxBatchItems], ErrBadMutation)
	must.ErrorIs(t, errs[MaxBatchItems+1], ErrBadMutation)
}
