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

// Cache bounds.
const (
	// DefaultCacheResources is GuardOptions.CacheResources when it is zero.
	DefaultCacheResources = 1 << 16
	// DefaultOpIndexBytes is GuardOptions.OpIndexBytes when it is zero: about
	// 1.7 million operation IDs at a 1.1% false-positive rate.
	DefaultOpIndexBytes = 2 << 20
	// MaxOpIndexBytes is the largest GuardOptions.OpIndexBytes allowed.
	MaxOpIndexBytes = 1 << 30

	opFilterHashes = 7
)

// stripe is one of the Guard's lock stripes and the cache of the resources
// that hash to it. Everything in it is read and written with the stripe held
// (its channel full), so the cache needs no lock of its own, and an entry is
// always what Pebble holds for its resource: the Guard writes it after every
// commit of that resource's records (write-through) and drops it when a
// commit fails, whose outcome it does not know.
type stripe struct {
	ch    chan struct{}
	cache map[string]*entry
	max   int // 0: no caching
}

// entry is what the Guard knows of one resource: its fence state as stored
// (found false: none), and its mode record, read only when a check fails or
// the mode is asked for (modeRead false: not read yet), so that a miss on the
// accepting path costs the reads it did before modes existed.
type entry struct {
	st    resourceState
	found bool
	// written: a write went through this entry since it was read, so the
	// resource is hot enough for a floor state record (records.go).
	written  bool
	mode     modeRecord // zero if none is stored
	modeRead bool
}

// lock takes the stripe of res. A stripe is a channel so that waiting honours
// ctx.
func (g *Guard) lock(ctx context.Context, res string) (*stripe, error) {
	s := &g.stripes[maphash.String(g.seed, res)%lockStripes]
	select {
	case s.ch <- struct{}{}:
		return s, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fence: resource %q: %w", res, context.Cause(ctx))
	}
}

func (s *stripe) unlock() { <-s.ch }

// entry returns res's cache entry (s held), reading it from Pebble on a miss.
func (g *Guard) entry(s *stripe, res string) (*entry, error) {
	if e := s.cache[res]; e != nil {
		return e, nil
	}
	e := &entry{}
	var err error
	if e.st, e.found, err = g.loadState(res); err != nil {
		return nil, err
	}
	if s.max > 0 {
		if len(s.cache) >= s.max {
			for k := range s.cache { // an arbitrary victim: a miss costs two reads
				delete(s.cache, k)
				break
			}
		}
		s.cache[res] = e
	}
	return e, nil
}

// forget drops res from the cache (s held) after a commit that failed: the
// batch may or may not be in Pebble, so the next use reads what is.
func (s *stripe) forget(res string) { delete(s.cache, res) }

func (g *Guard) loadMode(res string) (modeRecord, bool, error) {
	v, ok, err := g.get(g.modeKey(res))
	if err != nil || !ok {
		return modeRecord{}, false, err
	}
	r, err := decodeModeRecord(v)
	if err != nil {
		return modeRecord{}, false, fmt.Errorf("resource %q: %w", res, err)
	}
	return r, true, nil
}

// opFilter is a Bloom filter over the operation index keys (resource and
// operation ID) of every receipt: "no" proves an operation ID unused without
// reading Pebble, "maybe" costs the point read. It is never stored: NewGuard
// fills it from the operation index, so after a crash it holds exactly what
// survived, and Apply adds a key before committing its batch, so a commit
// whose outcome is unknown leaves a false positive, never a false negative.
// It is bounded: past its design load its false positives grow, and with them
// the reads, never the memory.
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
}

// opFilterBlockWords is a block's size in words: 512 bits, one cache line.
const opFilterBlockWords = 8

func newOpFilter(bytes int) *opFilter {
	n := max(1<<(bits.Len(uint(bytes/8))-1), opFilterBlockWords) // words, a power of two
	f := &opFilter{words: make([]atomic.Uint64, n), seed: maphash.MakeSeed()}
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
}

func (f *opFilter) mayContain(key []byte) bool {
	return f.probes(key, func(w int, bit uint64) bool { return f.words[w].Load()&bit != 0 })
}

// fillOpFilter adds every key of the operation index to the filter.
func (g *Guard) fillOpFilter() error {
	lower, upper := g.kindBounds(kindOp)
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("fence: read: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		g.ops.add(it.Key())
	}
	return errors.Join(it.Error(), it.Close())
}

// opRefAt is opRef of the operation index key key, reading Pebble only when
// the filter cannot rule the key out.
func (g *Guard) opRefAt(key []byte, res, opID string) (Token, uint64, bool, error) {
	if g.ops != nil && !g.ops.mayContain(key) {
		return Token{}, 0, false, nil
	}
	return g.opRef(res, opID)
}
