package fence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// records counts res's stored records of one kind.
func records(tb testing.TB, f *fixture, kind byte, res string) int {
	tb.Helper()
	lower := f.g.resourceKey(kind, res, 0)
	n, err := f.g.count(lower, keyUpperBound(lower))
	must.NoError(tb, err)
	return int(n)
}

// TestPruneForgetsAnswersNotFences: Prune deletes the receipts and index
// entries below its fence and nothing else. The resource still refuses
// every stale owner and keeps its position, segment order and replays; what
// it no longer has is the answer for the pruned operations, and it says so
// (ErrPruned) instead of answering "no receipt" or "refused". The same holds
// for a Guard that reads everything back, and an earlier release's Guard,
// which knows no pruned state, refuses the resource instead of answering.
func TestPruneForgetsAnswersNotFences(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{})
	const r = "res"
	t1, t2, t3 := tok(1, 1, 1), tok(1, 1, 2), tok(1, 1, 3)
	g1, g2, g3 := f.grant(r, "A", t1), f.grant(r, "B", t2), f.grant(r, "C", t3)
	writeSegments(t, f, g1, r, "A", 1, 3)
	writeSegments(t, f, g2, r, "B", 1, 2)
	writeSegments(t, f, g3, r, "C", 1, 1)
	writeSegments(t, f, f.grant("other", "A", t1), "other", "A", 1, 2)

	_, err := f.g.Prune(ctx, r, tok(1, 1, 4))
	must.ErrorIs(t, err, ErrPruneAboveHighest)
	n, err := f.g.Prune(ctx, r, t2)
	must.NoError(t, err)
	must.Equal(t, 3, n, "the three receipts under t1")
	must.Equal(t, 3, records(t, f, kindReceipt, r))
	must.Equal(t, 3, records(t, f, kindOp, r))
	must.Equal(t, 2, records(t, f, kindReceipt, "other"), "another resource keeps its receipts")
	n, err = f.g.Prune(ctx, r, t1)
	must.NoError(t, err)
	must.Equal(t, 0, n, "a lower fence prunes nothing more")

	for name, g := range map[string]*fixture{"cached": f, "reopened": reopened(t, f)} {
		t.Run(name, func(t *testing.T) {
			info, err := g.g.Resources(ctx)
			must.NoError(t, err)
			must.Equal(t, t3, info[1].Highest)
			must.Equal(t, uint64(1), info[1].LastSegment)
			must.Equal(t, uint64(6), info[1].Accepted)
			must.Equal(t, t2, info[1].PrunedBelow, "the higher of the two fences pruned below")

			_, err = g.g.Receipt(ctx, r, "A-1")
			must.ErrorIs(t, err, ErrPruned)
			must.False(t, errors.Is(err, ErrNoReceipt), "a pruned operation is not one without a receipt")
			_, err = g.g.Receipt(ctx, r, "never")
			must.ErrorIs(t, err, ErrPruned, "Receipt cannot tell a pruned operation from an unknown one")
			rc, err := g.g.Receipt(ctx, r, "B-2")
			must.NoError(t, err)
			must.Equal(t, t2, rc.Token)
			_, err = g.g.Receipt(ctx, "other", "never")
			must.ErrorIs(t, err, ErrNoReceipt, "a resource never pruned answers as before")

			_, err = g.g.Reconcile(ctx, r, "A-2", t1)
			must.ErrorIs(t, err, ErrPruned)
			_, err = g.g.Reconcile(ctx, r, "never", t1)
			must.ErrorIs(t, err, ErrPruned, "sent below the pruned fence: it may have been accepted")
			out, err := g.g.Reconcile(ctx, r, "never", t2)
			must.NoError(t, err)
			must.Equal(t, OutcomeRefused, out.Outcome, "t2's receipts are all kept, so none proves a refusal")
			out, err = g.g.Reconcile(ctx, r, "B-1", t2)
			must.NoError(t, err)
			must.Equal(t, OutcomeAccepted, out.Outcome)
		})
	}

	// The fences stand: stale owners, order, replay, the next segment.
	f.refused(mut(g1, r, "A", "A-4", 4, "x"), ErrStaleOwner)
	f.refused(mut(g2, r, "B", "B-3", 3, "x"), ErrStaleOwner)
	f.refused(mut(g3, r, "C", "C-3", 3, "x"), ErrSegmentOrder)
	_, err = f.apply(mut(g3, r, "C", "C-1", 1, "x"))
	must.NoError(t, err, "a resend of the current fence's segment replays")
	writeSegments(t, f, g3, r, "C", 2, 2)
	// F7 holds for the receipts kept only: a new owner reusing a pruned
	// operation ID is accepted, one reusing a kept one is not.
	g4 := f.grant(r, "D", tok(1, 1, 5))
	f.refused(mut(g4, r, "D", "B-1", 1, "x"), ErrDuplicateOp)
	f.accepted(mut(g4, r, "D", "A-1", 1, "x"))

	// The state written after the Prune keeps the pruned fence, at a
	// version an earlier release does not read (it knows 2 and 3 only).
	v, ok, err := f.g.get(f.g.stateKey(r))
	must.NoError(t, err)
	must.True(t, ok && (v[0] == stateFloor+statePruned || v[0] == stateExact+statePruned), "stored at version %d", v[0])
	must.Equal(t, t2, storedState(t, f, r).PrunedBelow)
}

// countdown is a context whose Err turns to Canceled after n calls: it
// stops Prune between two of its batches.
type countdown struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *countdown) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestPruneInterrupted: a Prune stopped between batches has recorded its
// fence first, so the receipts it has not deleted yet are still answered
// and the ones it has are ErrPruned, never "no receipt"; each batch deletes
// receipts together with their index entries; and the next Prune, whatever
// its fence, finishes the deletions.
func TestPruneInterrupted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{})
	const r = "res"
	total := 2*pruneBatch + 300
	tokens := make([]Token, total)
	for i := range total {
		tokens[i] = tok(1, 1, uint64(i+1))
		f.accepted(mut(f.grant(r, "A", tokens[i]), r, "A", fmt.Sprintf("op%d", i), 1, "x"))
	}
	below := tokens[total-10]
	n, err := f.g.Prune(&countdown{Context: ctx, n: 0}, r, below)
	must.ErrorIs(t, err, context.Canceled)
	must.Equal(t, pruneBatch, n, "one batch, then the context")
	must.Equal(t, total-pruneBatch, records(t, f, kindReceipt, r))
	must.Equal(t, total-pruneBatch, records(t, f, kindOp, r), "index entries go with their receipts")

	g := reopened(t, f)
	for i := range total {
		_, err := g.g.Receipt(ctx, r, fmt.Sprintf("op%d", i))
		if i < pruneBatch {
			must.ErrorIs(t, err, ErrPruned, "op%d", i)
		} else {
			must.NoError(t, err, "op%d is not deleted yet", i)
		}
	}
	n, err = g.g.Prune(ctx, r, Token{})
	must.NoError(t, err)
	must.Equal(t, total-10-pruneBatch, n, "the rest below the recorded fence")
	must.Equal(t, 10, records(t, f, kindReceipt, r))
	must.Equal(t, 10, records(t, f, kindOp, r))
}

// TestPruneCrash crashes the store while a Prune runs, keeping a random
// share of unsynced data: after every crash each operation is either
// answered with its receipt or, if it lies below a fence the store recorded
// as pruned, ErrPruned; no operation is answered "no receipt" or
// "refused"; receipts and index entries exist together; and a Prune after
// the restart leaves exactly the receipts at or above the fence.
func TestPruneCrash(t *testing.T) {
	ctx := context.Background()
	ring := newRing(t)
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}, MemTableSize: 1 << 20})
	must.NoError(t, err)
	g, err := NewGuard(db, ring, GuardOptions{Prefix: []byte(testPrefix)})
	must.NoError(t, err)
	const r, total, kept = "res", 6 * pruneBatch, 25
	for i := range total {
		s, err := ring.Sign(baseGrant(r, "A", tok(1, 1, uint64(i+1))))
		must.NoError(t, err)
		_, err = g.Apply(ctx, Mutation{Signed: s, Resource: r, Owner: "A", Operation: "write",
			OpID: fmt.Sprintf("op%d", i), Segment: 1, Payload: []byte("x")}, nil)
		must.NoError(t, err)
	}
	below := tok(1, 1, total-kept+1)
	done := make(chan error, 1)
	go func() {
		_, err := g.Prune(ctx, r, below)
		done <- err
	}()
	var clones []*vfs.MemFS
	rng := rand.New(rand.NewPCG(5, 6))
	for running := true; running; {
		select {
		case err := <-done:
			must.NoError(t, err)
			running = false
		default:
		}
		clones = append(clones, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}))
	}
	must.NoError(t, db.Close())
	partial := 0
	for i, c := range clones {
		db, err := pebble.Open("db", &pebble.Options{FS: c, Logger: quietLogger{}})
		must.NoError(t, err, "reopen after crash %d", i)
		g, err := NewGuard(db, ring, GuardOptions{Prefix: []byte(testPrefix)})
		must.NoError(t, err)
		f := &fixture{t: t, db: db, ring: ring, g: g}
		info, err := g.Resources(ctx)
		must.NoError(t, err)
		pruned := info[0].PrunedBelow
		must.True(t, pruned.IsZero() || pruned == below, "crash %d: pruned below %s", i, pruned)
		left := records(t, f, kindReceipt, r)
		must.Equal(t, left, records(t, f, kindOp, r), "crash %d: receipts and index entries apart", i)
		if left > kept && left < total {
			partial++
		}
		for j := range total {
			op := fmt.Sprintf("op%d", j)
			_, err := g.Receipt(ctx, r, op)
			if err != nil {
				must.True(t, j < total-kept && pruned == below, "crash %d: %s lost: %v", i, op, err)
				must.ErrorIs(t, err, ErrPruned, "crash %d: %s", i, op)
			}
			out, err := g.Reconcile(ctx, r, op, tok(1, 1, uint64(j+1)))
			if err == nil {
				must.Equal(t, OutcomeAccepted, out.Outcome, "crash %d: %s", i, op)
			} else {
				must.ErrorIs(t, err, ErrPruned, "crash %d: %s", i, op)
			}
		}
		_, err = g.Prune(ctx, r, below)
		must.NoError(t, err)
		must.Equal(t, kept, records(t, f, kindReceipt, r), "crash %d: after a second Prune", i)
		must.Equal(t, kept, records(t, f, kindOp, r))
		must.NoError(t, db.Close())
	}
	t.Logf("%d crashes, %d of them part way through the deletions", len(clones), partial)
	must.True(t, len(clones) >= 2, "only %d crashes taken", len(clones))
}

// TestPruneBesideWriters prunes resources while writers write them, with
// each Prune below a fence a writer had acknowledged earlier: every
// acknowledged write keeps its receipt or, below the fence its resource
// was pruned below, is answered ErrPruned; the resources' positions are
// their last acknowledged writes; and stale writers are still refused.
func TestPruneBesideWriters(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{CacheResources: 2})
	resources := []string{"r0", "r1", "r2"}
	type ack struct {
		op  string
		tok Token
	}
	var mu sync.Mutex
	acked := map[string][]ack{}
	pruned := map[string]Token{}
	grants := map[string]uint64{} // per resource: how many grants it was written under
	wasPruned := func(r string) bool {
		mu.Lock()
		defer mu.Unlock()
		return !pruned[r].IsZero()
	}
	var wg, writers sync.WaitGroup
	for w, r := range resources {
		writers.Add(1)
		wg.Go(func() {
			defer writers.Done()
			// At least 300 operations, and on until the pruner has pruned
			// this resource once: a descheduled pruner must not make the
			// test about nothing (the cap ends a Prune that never lands).
			c := uint64(0)
			defer func() {
				mu.Lock()
				grants[r] = c
				mu.Unlock()
			}()
			for ; c < 300 || (!wasPruned(r) && c < 100_000); c++ {
				tk := tok(1, 1, c+1)
				signed := f.grant(r, "A", tk)
				for seg := uint64(1); seg <= 2; seg++ {
					op := fmt.Sprintf("w%d-%d-%d", w, c, seg)
					if _, err := f.apply(mut(signed, r, "A", op, seg, op)); err != nil {
						t.Errorf("%s: %v", op, err)
						return
					}
					mu.Lock()
					acked[r] = append(acked[r], ack{op, tk})
					mu.Unlock()
				}
			}
		})
	}
	writing := make(chan struct{})
	go func() { writers.Wait(); close(writing) }()
	deleted := 0
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 8))
		for {
			select {
			case <-writing:
				return
			default:
			}
			r := resources[rng.IntN(len(resources))]
			mu.Lock()
			n := len(acked[r])
			var below Token
			if n > 0 {
				below = acked[r][rng.IntN(n)].tok
			}
			mu.Unlock()
			if below.IsZero() {
				continue
			}
			n, err := f.g.Prune(ctx, r, below)
			if err != nil {
				t.Errorf("prune %s below %s: %v", r, below, err)
				return
			}
			mu.Lock()
			deleted += n
			if pruned[r].Less(below) {
				pruned[r] = below
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	must.Len(t, pruned, len(resources), "every resource pruned while written")
	must.True(t, deleted > 0, "nothing pruned")
	t.Logf("%d receipts pruned while %d were written", deleted, 2*(grants["r0"]+grants["r1"]+grants["r2"]))
	for _, g := range []*fixture{f, reopened(t, f)} {
		infos, err := g.g.Resources(ctx)
		must.NoError(t, err)
		for i, r := range resources {
			must.Equal(t, pruned[r], infos[i].PrunedBelow, r)
			must.Equal(t, tok(1, 1, grants[r]), infos[i].Highest, r)
			must.Equal(t, uint64(2), infos[i].LastSegment, r)
			must.Equal(t, 2*grants[r], infos[i].Accepted, r)
			for _, a := range acked[r] {
				_, err := g.g.Receipt(ctx, r, a.op)
				if a.tok.Less(pruned[r]) {
					must.ErrorIs(t, err, ErrPruned, a.op)
				} else {
					must.NoError(t, err, a.op)
				}
			}
			g.refused(mut(f.grant(r, "A", tok(1, 1, 1)), r, "A", "late", 3, "x"), ErrStaleOwner)
		}
	}
}
