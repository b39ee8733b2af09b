package fence

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// pruneBatch is how many receipts' operation-index entries one of Prune's
// batches deletes: a resource with millions of receipts is pruned in
// batches of bounded size, with ctx checked between them.
const pruneBatch = 1024

// Prune deletes resource's receipts under fences below below, and their
// operation-index entries, and returns how many receipts it deleted: a store
// that never prunes keeps a receipt and an index entry for every write it
// accepted (about 110 bytes a write), forever.
//
// What it gives up is the answer for those operations, nothing that
// protects the resource. The highest fence, the last segment and the count
// stay (below may not exceed the highest fence: ErrPruneAboveHighest), so a
// stale owner is refused as before (F1); a regressed token below below is
// refused as ErrStaleOwner, since the receipts that would prove the
// regression are gone. But:
//
//   - Receipt answers ErrPruned, not ErrNoReceipt, for an operation ID it
//     has no receipt of, and Reconcile answers ErrPruned for one sent under
//     a fence below below: such an operation's outcome is unknown for good.
//   - F7 holds only for receipts kept: an operation ID whose receipt was
//     pruned is accepted again under a new fence. Prune below a fence only
//     once no owner will resend, or ask about, an operation sent under a
//     lower one: typically, some time after every worker that took the
//     resource over under a later fence has reconciled (see Unknown
//     outcomes).
//
// To keep only each resource's current fence, prune every resource listed
// by Resources below its Highest.
//
// Prune first records below in the resource's state record, synced, then
// deletes: after a crash part way, the receipts left are still true, and
// the next Prune (with any fence) finishes the deletions. It holds the
// resource, as Apply does, while it deletes. A store that a Guard has pruned
// is refused as corrupt by a Guard of an earlier release, which would answer
// "no receipt" for a pruned operation.
//
// When Prune has deleted at least half of what the operation filter holds
// (GuardOptions.OpIndexBytes), and that is past half the filter's design
// load, the Prune that finds it so also rebuilds the filter from the index,
// while writes go on: a pass over every index entry the store keeps.
func (g *Guard) Prune(ctx context.Context, resource string, below Token) (int, error) {
	n, err := g.prune(ctx, resource, below)
	if err != nil {
		return n, err
	}
	if f := g.opFilter(); f != nil && f.worthRebuilding() {
		if err := g.rebuildOpFilter(ctx); err != nil {
			return n, fmt.Errorf("fence: prune resource %q below %s: %d receipts pruned, then: %w", resource, below, n, err)
		}
	}
	return n, nil
}

// prune is Prune without the filter's rebuild, which must not wait for the
// stripes with one of them held.
func (g *Guard) prune(ctx context.Context, resource string, below Token) (int, error) {
	switch {
	case len(resource) > MaxResourceLen:
		return 0, fmt.Errorf("%w: resource over %d bytes", ErrTooLarge, MaxResourceLen)
	case resource == "":
		return 0, fmt.Errorf("%w: empty resource", ErrBadMutation)
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return 0, err
	}
	defer s.unlock()
	e, err := g.entry(s, resource)
	if err != nil {
		return 0, err
	}
	if !e.found {
		return 0, nil // nothing accepted, nothing to prune
	}
	if below.Compare(e.st.Highest) > 0 {
		return 0, fmt.Errorf("%w: resource %q: below %s, highest %s", ErrPruneAboveHighest, resource, below, e.st.Highest)
	}
	if e.st.PrunedBelow.Less(below) {
		st := e.st
		st.PrunedBelow, st.version = below, stateExact
		if err := g.db.Set(g.stateKey(resource), st.encode(), pebble.Sync); err != nil {
			s.forget(resource)
			return 0, fmt.Errorf("fence: prune resource %q below %s: %w", resource, below, err)
		}
		e.st = st
	}
	// Up to the highest fence ever pruned below: what an interrupted Prune
	// left is deleted now.
	n, err := g.deleteReceipts(ctx, resource, e.st.PrunedBelow)
	if err != nil {
		return n, fmt.Errorf("fence: prune resource %q below %s: %w", resource, below, err)
	}
	return n, nil
}

// deleteReceipts deletes res's receipts below fence below and their
// operation-index entries, in batches (res's stripe held).
func (g *Guard) deleteReceipts(ctx context.Context, res string, below Token) (int, error) {
	if below.IsZero() {
		return 0, nil
	}
	lower, upper := g.resourceKey(kindReceipt, res, 0), g.receiptKey(res, below, 0)
	it, err := g.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	defer it.Close()
	n, pending := 0, 0
	b := g.db.NewBatch()
	defer func() { b.Close() }()
	var last []byte
	// flush commits the batch: the pending receipts' index entries, and the
	// receipts up to and including last as one range deletion, which later
	// scans of the range (the next Prune's) skip in one step.
	flush := func() error {
		if err := b.DeleteRange(lower, append(last, 0), nil); err != nil {
			return err
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return err
		}
		g.stats.pruned.Add(uint64(pending))
		if f := g.opFilter(); f != nil {
			f.removed.Add(int64(pending))
		}
		n, pending = n+pending, 0
		b.Close()
		b = g.db.NewBatch()
		return nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
		rc, err := decodeReceipt(res, v)
		if err != nil {
			return n, fmt.Errorf("receipt: %w", err)
		}
		if err := b.Delete(g.opKey(res, rc.OpID), nil); err != nil {
			return n, err
		}
		last, pending = append(last[:0], it.Key()...), pending+1
		if pending == pruneBatch {
			if err := flush(); err != nil {
				return n, err
			}
			if err := ctx.Err(); err != nil {
				return n, context.Cause(ctx)
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("read: %w", err)
	}
	if pending > 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}
