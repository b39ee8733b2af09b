package fence

import (
	"context"
	"fmt"
	"testing"
)

// storedState reads res's state record as it is on disk, without the
// position its receipts carry it on to.
func storedState(tb testing.TB, f *fixture, res string) resourceState {
	tb.Helper()
	v, ok, err := f.g.get(f.g.stateKey(res))
	must.NoError(tb, err)
	must.True(tb, ok, "no state record for %q", res)
	st, err := decodeState(v)
	must.NoError(tb, err)
	return st
}

// reopened is a new Guard on f's store with no cache, as after a restart:
// everything it knows of a resource it reads back, and every write it
// makes is its entry's first.
func reopened(tb testing.TB, f *fixture) *fixture {
	tb.Helper()
	g, err := NewGuard(f.db, f.ring, GuardOptions{Prefix: []byte(testPrefix), CacheResources: -1, OpIndexBytes: -1})
	must.NoError(tb, err)
	return &fixture{t: tb, db: f.db, ring: f.ring, g: g}
}

func writeSegments(tb testing.TB, f *fixture, signed []byte, res, owner string, from, to uint64) {
	tb.Helper()
	for seg := from; seg <= to; seg++ {
		_, err := f.apply(mut(signed, res, owner, fmt.Sprintf("%s-%d", owner, seg), seg, "x"))
		must.NoError(tb, err, "segment %d", seg)
	}
}

// TestPositionLivesInReceipts: a resource written through one cache entry
// stores an exact state record, then a floor, then nothing but receipts;
// a Guard that reads it back (a restart, a cache miss) still has the
// highest fence, its last segment and the count: a lower token is stale, a
// skipped segment out of order, a resend a replay, the next one accepted.
func TestPositionLivesInReceipts(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	const r = "res"
	t1, t2 := tok(3, 1, 7), tok(3, 1, 9)
	g1, g2 := f.grant(r, "A", t1), f.grant(r, "B", t2)
	writeSegments(t, f, g1, r, "A", 1, 1)
	disk := storedState(t, f, r)
	must.Equal(t, uint8(stateExact), disk.version, "the first write stores the exact position")
	writeSegments(t, f, g1, r, "A", 2, 3)
	writeSegments(t, f, g2, r, "B", 1, 2)
	disk = storedState(t, f, r)
	must.Equal(t, uint8(stateFloor), disk.version, "the second write stores a floor")
	must.Equal(t, t1, disk.Highest, "later writes leave the floor alone")
	must.Equal(t, uint64(2), disk.LastSegment)

	for _, g := range []*fixture{f, reopened(t, f)} {
		info, err := g.g.Resources(context.Background())
		must.NoError(t, err)
		must.Len(t, info, 1)
		must.Equal(t, t2, info[0].Highest)
		must.Equal(t, uint64(2), info[0].LastSegment)
		must.Equal(t, uint64(5), info[0].Accepted)
	}
	cold := reopened(t, f)
	_, err := cold.apply(mut(g1, r, "A", "a9", 4, "x"))
	must.ErrorIs(t, err, ErrStaleOwner)
	_, err = cold.apply(mut(g2, r, "B", "b9", 4, "x"))
	must.ErrorIs(t, err, ErrSegmentOrder)
	rc, err := cold.apply(mut(g2, r, "B", "B-2", 2, "x"))
	must.NoError(t, err, "a resend of the last segment is a replay")
	must.Equal(t, uint64(5), rc.Seq)
	rc, err = cold.apply(mut(g2, r, "B", "B-3", 3, "x"))
	must.NoError(t, err)
	must.Equal(t, uint64(6), rc.Seq)
	disk = storedState(t, cold, r)
	must.Equal(t, uint8(stateExact), disk.version, "a write through a fresh entry stores the exact position")
	must.Equal(t, t2, disk.Highest)
	must.Equal(t, uint64(3), disk.LastSegment)
	must.Equal(t, uint64(6), disk.Accepted)
}

// TestColdWritesStayExact: a Guard with no cache reads every resource back
// and stores the exact position at every write, so a store written only so
// is what a Guard that knows only version 2 reads, and loads never scan
// receipts. A state version this Guard does not know is refused, as a Guard
// that knows only version 2 refuses a floor.
func TestColdWritesStayExact(t *testing.T) {
	f := reopened(t, newFixture(t, GuardOptions{}))
	const r = "res"
	g1 := f.grant(r, "A", tok(2, 1, 1))
	writeSegments(t, f, g1, r, "A", 1, 4)
	disk := storedState(t, f, r)
	must.Equal(t, uint8(stateExact), disk.version, "version 2, which an earlier Guard reads")
	must.Equal(t, uint64(4), disk.LastSegment)

	must.NoError(t, f.db.Set(f.g.stateKey(r), append([]byte{stateFloor + statePruned + 1}, disk.encode()[1:]...), nil))
	_, err := f.apply(mut(g1, r, "A", "A-5", 5, "x"))
	must.ErrorIs(t, err, ErrCorruptRecord)
}

// TestMigrationClearsThroughExactState: Migrate raises the floor the new
// domain must pass without a receipt; the first write from the new domain
// stores the exact state, migration cleared, and later writes go back to a
// floor and receipts.
func TestMigrationClearsThroughExactState(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	const r = "res"
	writeSegments(t, f, f.grant(r, "A", tok(5, 1, 1)), r, "A", 1, 3)
	must.Equal(t, uint8(stateFloor), storedState(t, f, r).version)
	must.NoError(t, f.g.Migrate(context.Background(), r, "cluster-a", "cluster-b"))
	must.Equal(t, uint8(stateExact), storedState(t, f, r).version)
	inB := func(g *Grant) { g.Domain = "cluster-b" }
	_, err := reopened(t, f).apply(mut(f.grant(r, "B", tok(4, 9, 9), inB), r, "B", "low", 1, "y"))
	must.ErrorIs(t, err, ErrMigrationPending)
	high := f.grant(r, "B", tok(6, 1, 1), inB)
	writeSegments(t, f, high, r, "B", 1, 1)
	disk := storedState(t, f, r)
	must.Equal(t, uint8(stateExact), disk.version)
	must.Equal(t, "", disk.MigratedFrom)
	must.Equal(t, "cluster-b", disk.Domain)
	writeSegments(t, f, high, r, "B", 2, 4)
	must.Equal(t, uint8(stateFloor), storedState(t, f, r).version)
	info, err := reopened(t, f).g.Resources(context.Background())
	must.NoError(t, err)
	must.Equal(t, tok(6, 1, 1), info[0].Highest)
	must.Equal(t, uint64(4), info[0].LastSegment)
	must.Equal(t, "", info[0].MigratingFrom)
}
