package fence

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// opFilter is a Bloom filter over the operation index keys (resource and
// operation ID) of every receipt: "no" proves an operation ID unused without
// reading Pebble, "maybe" costs the point read. It is never stored: NewGuard
// fills it from the operation index, so after a crash it holds exactly what
// survived, and Apply adds a key before committing its batch, so a commit
// whose outcome is unknown leaves a false positive, never a false negative.
// It is bounded: past its design load its false positives grow, and with them
// the reads, never the memory.
//
// It has no deletion: an index entry Prune deletes stays in it. When Prune
// has deleted at least half of what a filter holds past half its design
// load, the Guard builds a new one from the index while writes go on
// (rebuildOpFilter), so a store that prunes keeps its filter near the load
// it actually holds instead of saturating it.
//
// It is blocked: a key's bits all lie in one 512-bit block, a cache line, so
// a lookup and an add touch one line of a filter megabytes wide instead of
// one line a bit (seven cache misses were most of the filter's cost on the
// write path: BenchmarkGuardApply/mem-bloom/hit added p50 2.9-3.1 -> 2.6-2.7
// µs). The price is a slightly higher false-positive rate for the same
// memory, 1.1% at the default's design load against 1%
// (TestOpFilterFalsePositives).
type opFilter struct {
	words []atomic.Uint64
	shift uint // 64 - log2(blocks)
	seed  maphash.Seed
	// design is the load the filter is sized for (about 9.8 bits a key);
	// keys counts what was added to it, removed the index entries Prune
	// deleted since it was made. They only decide when to rebuild.
	design        int64
	keys, removed atomic.Int64
}

// opFilterBlockWords is a block's size in words: 512 bits, one cache line.
const opFilterBlockWords = 8

func newOpFilter(bytes int) *opFilter {
	n := max(1<<(bits.Len(uint(bytes/8))-1), opFilterBlockWords) // words, a power of two
	f := &opFilter{words: make([]atomic.Uint64, n), seed: maphash.MakeSeed(), design: int64(n) * 64 * 10 / 98}
	f.shift = uint(64 - bits.Len(uint(n/opFilterBlockWords)-1))
	return f
}

// probes calls fn with each bit of key: the hash's top bits pick the block,
// and nine bits of its remix (splitmix64's finalizer) each bit in it.
func (f *opFilter) probes(key []byte, fn func(word int, bit uint64) bool) bool {
	h := maphash.Bytes(f.seed, key)
	block := int(h>>f.shift) * opFilterBlockWords
	p := (h ^ h>>33) * 0xff51afd7ed558ccd
	p = (p ^ p>>33) * 0xc4ceb9fe1a85ec53
	p ^= p >> 33
	for range opFilterHashes {
		b := p & 511
		p >>= 9
		if !fn(block+int(b>>6), 1<<(b&63)) {
			return false
		}
	}
	return true
}

func (f *opFilter) add(key []byte) {
	f.probes(key, func(w int, bit uint64) bool { f.words[w].Or(bit); return true })
	f.keys.Add(1)
}

func (f *opFilter) mayContain(key []byte) bool {
	return f.probes(key, func(w int, bit uint64) bool { return f.words[w].Load()&bit != 0 })
}

// worthRebuilding reports whether a rebuild would at least halve a load
// that is past half the design load: below that the false positives are
// already rare. A rebuild reads every live index entry once, which is at
// most as many as Prune deleted since the filter was made: the rebuild
// costs a pruned entry at most one more read.
func (f *opFilter) worthRebuilding() bool {
	k := f.keys.Load()
	return k > f.design/2 && f.removed.Load() >= k/2
}

// fillOpFilter adds every key of the operation index to f.
func (g *Guard) fillOpFilter(ctx context.Context, f *opFilter) error {
	lower, upper := g.kindBounds(kindOp)
	it, err := g.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("fence: read: %w", err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		f.add(it.Key())
		if n++; n%pruneBatch == 0 && ctx.Err() != nil {
			break
		}
	}
	return errors.Join(it.Error(), it.Close(), context.Cause(ctx))
}

// opFilters is the operation filter in place and, while rebuildOpFilter
// fills one, its replacement. A pair is never changed, only replaced, so an
// Apply reads both from one atomic load: there is no moment at which it could
// see the replacement in place but not the filter it replaces, or the reverse.
type opFilters struct {
	cur, next *opFilter
}

// opFilter is the filter in place, nil when it is off.
func (g *Guard) opFilter() *opFilter {
	if p := g.ops.Load(); p != nil {
		return p.cur
	}
	return nil
}

// addOp adds an operation index key to the filter before its commit. While
// a rebuild is filling a replacement, the key goes into both, so that
// whichever filter the rebuild leaves in place has it (rebuildOpFilter).
func (g *Guard) addOp(key []byte) {
	p := g.ops.Load()
	if p == nil {
		return
	}
	p.cur.add(key)
	if p.next != nil {
		p.next.add(key)
	}
}

// opRefAt is opRef of the operation index key key, reading Pebble only when
// the filter cannot rule the key out.
func (g *Guard) opRefAt(key []byte, res, opID string) (Token, uint64, bool, error) {
	if f := g.opFilter(); f != nil && !f.mayContain(key) {
		return Token{}, 0, false, nil
	}
	return g.opRef(res, opID)
}

// rebuildOpFilter replaces the operation filter with one filled from the
// index as it is now, without stopping writes. The replacement must hold
// every index key committed before it takes over, or F7 breaks (a "no" for
// an operation ID that has a receipt):
//
//  1. the pair (old, replacement) is published, so every Apply that loads
//     it afterwards adds its key to the replacement too;
//  2. every stripe is taken and let go once: an Apply holds its stripe from
//     before it loads the pair until after its commit, so the Applies that
//     may have loaded the old filter alone have all committed (or failed)
//     now;
//  3. the index is read into the replacement: it holds what those Applies
//     committed, and every later Apply adds its own key;
//  4. the replacement alone takes over. An Apply that loaded the pair
//     before this adds to both, so to the replacement as well.
//
// The old filter stays correct throughout (it keeps taking every key), so a
// rebuild stopped by ctx just drops the replacement. One rebuild runs at a
// time; a second caller returns at once.
func (g *Guard) rebuildOpFilter(ctx context.Context) error {
	old := g.opFilter()
	if old == nil || !g.opsRebuilding.CompareAndSwap(false, true) {
		return nil
	}
	defer g.opsRebuilding.Store(false)
	next := newOpFilter(len(old.words) * 8)
	g.ops.Store(&opFilters{cur: old, next: next})
	for i := range g.stripes {
		if err := g.stripes[i].lock(ctx); err != nil {
			g.ops.Store(&opFilters{cur: old})
			return fmt.Errorf("rebuild the operation filter: %w", err)
		}
		g.stripes[i].unlock()
	}
	if err := g.fillOpFilter(ctx, next); err != nil {
		g.ops.Store(&opFilters{cur: old})
		return fmt.Errorf("rebuild the operation filter: %w", err)
	}
	g.ops.Store(&opFilters{cur: next})
	g.stats.opFilterRebuilds.Add(1)
	return nil
}
