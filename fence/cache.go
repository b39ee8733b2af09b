package fence

import (
	"context"
	"fmt"
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

// lock takes the stripe of res.
func (g *Guard) lock(ctx context.Context, res string) (*stripe, error) {
	s := &g.stripes[g.stripeOf(res)]
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("fence: resource %q: %w", res, err)
	}
	return s, nil
}

// lock takes s. A stripe is a channel so that waiting honours ctx.
func (s *stripe) lock(ctx context.Context) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
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
