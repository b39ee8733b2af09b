package fence

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// MaxBatchItems bounds ApplyBatch's items.
const MaxBatchItems = 1024

// BatchItem is one mutation of ApplyBatch and the business write it stages
// (Apply's stage; nil for a fence-only write).
type BatchItem struct {
	Mutation Mutation
	Stage    func(b *pebble.Batch) error
}

// ApplyBatch applies items as Apply would apply each, one after another,
// except that every item accepted is committed in one synced Pebble batch:
// a store that applies a stream of writes (a replica catching up on its
// replication log) pays for one sync, not one per write. Each item's result
// is at its index: the receipt, or the error Apply would have returned. If
// the batch's commit fails, every accepted item gets that error and none
// of them is known to have been applied, as for Apply. Items refused, exact
// resends, and shadow-mode commits (which commit on their own, as in Apply)
// do not touch the shared batch.
//
// The items must name distinct resources, so that no item's checks depend
// on another's uncommitted records: an item naming a resource an earlier
// item names is refused with ErrBadMutation, and so is every item past
// MaxBatchItems. The business writes of each item are staged in a batch of
// their own first, so a stage that fails aborts its item alone. Every
// resource's lock is held from its check until the commit.
func (g *Guard) ApplyBatch(ctx context.Context, items []BatchItem) ([]Receipt, []error) {
	rcs := make([]Receipt, len(items))
	errs := make([]error, len(items))
	type judged struct {
		i  int
		gr Grant
		// root and authErr are authenticate's; digest the payload's.
		root    [32]byte
		authErr error
		digest  [32]byte
		stripe  int
	}
	todo := make([]judged, 0, len(items))
	seen := make(map[string]struct{}, len(items))
	for i := range items {
		m := &items[i].Mutation
		if i >= MaxBatchItems {
			errs[i] = fmt.Errorf("%w: resource %q: batch item %d of at most %d", ErrBadMutation, m.Resource, i, MaxBatchItems)
			continue
		}
		if err := g.checkMutation(m); err != nil {
			errs[i] = err
			continue
		}
		if _, dup := seen[m.Resource]; dup {
			errs[i] = fmt.Errorf("%w: resource %q named twice in one batch", ErrBadMutation, m.Resource)
			continue
		}
		seen[m.Resource] = struct{}{}
		j := judged{i: i, digest: sha256.Sum256(m.Payload), stripe: g.stripeOf(m.Resource)}
		j.gr, j.root, j.authErr = g.authenticate(m)
		todo = append(todo, j)
	}
	// Stripes are taken in index order, each once (resources share them):
	// two batches never wait for each other in a cycle, and Apply holds one
	// stripe at a time.
	order := make([]int, 0, len(todo))
	for _, j := range todo {
		order = append(order, j.stripe)
	}
	slices.Sort(order)
	order = slices.Compact(order)
	for k, si := range order {
		if err := g.stripes[si].lock(ctx); err != nil {
			for _, held := range order[:k] {
				g.stripes[held].unlock()
			}
			for _, j := range todo {
				errs[j.i] = fmt.Errorf("fence: resource %q: %w", items[j.i].Mutation.Resource, err)
			}
			return rcs, errs
		}
	}
	defer func() {
		for _, si := range order {
			g.stripes[si].unlock()
		}
	}()

	b := g.db.NewBatch()
	defer b.Close()
	one := g.db.NewBatch()
	defer one.Close()
	type accepted struct {
		staged
		i int
		s *stripe
	}
	var pending []accepted
	for _, j := range todo {
		it := &items[j.i]
		s := &g.stripes[j.stripe]
		one.Reset()
		a, ok, rc, err := g.judge(ctx, s, &it.Mutation, &j.gr, j.root, j.authErr, j.digest, it.Stage, one)
		if !ok {
			rcs[j.i], errs[j.i] = rc, err
			continue
		}
		if err := b.Apply(one, nil); err != nil {
			s.forget(it.Mutation.Resource) // its operation is in the filter; the entry is as stored
			errs[j.i] = fmt.Errorf("fence: resource %q token %s: %w", it.Mutation.Resource, j.gr.Token, err)
			continue
		}
		pending = append(pending, accepted{a, j.i, s})
	}
	if len(pending) == 0 {
		return rcs, errs
	}
	if err := b.Commit(pebble.Sync); err != nil {
		for _, a := range pending {
			a.s.forget(a.rc.Resource)
			errs[a.i] = fmt.Errorf("fence: commit resource %q in a batch of %d: %w", a.rc.Resource, len(pending), err)
		}
		return rcs, errs
	}
	for _, a := range pending {
		a.committed()
		rcs[a.i] = a.rc
	}
	g.stats.accepted.Add(uint64(len(pending)))
	return rcs, errs
}

// stripeOf is the index of res's stripe.
func (g *Guard) stripeOf(res string) int {
	return int(maphash.String(g.seed, res) % lockStripes)
}
