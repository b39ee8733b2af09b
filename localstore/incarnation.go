package localstore

import (
	"fmt"
	"math"
)

// BumpIncarnation increments the stored incarnation and syncs it before it
// returns the new value; the first ever bump returns 1. A node calls it once
// per start, before it sends anything: tokens and request IDs begin with the
// incarnation, so a value handed out twice could repeat a token (S1).
func (s *Store) BumpIncarnation() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return 0, err
	}
	v, err := s.get(incarnationKey)
	if err != nil {
		return 0, err
	}
	var cur uint64
	if v != nil {
		if cur, err = decodeIncarnation(v); err != nil {
			return 0, s.corrupt(err)
		}
	}
	if cur == math.MaxUint64 {
		return 0, fmt.Errorf("%w: %q is at %d", ErrIncarnationExhausted, s.dir, cur)
	}
	next := cur + 1
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(incarnationKey, encodeIncarnation(next), nil); err != nil {
		return 0, fmt.Errorf("localstore: bump incarnation in %q: %w", s.dir, err)
	}
	if err := s.write(b); err != nil {
		return 0, err
	}
	s.inc = next
	return next, nil
}

// Incarnation returns the value this Store last bumped to, or 0 if
// BumpIncarnation has not succeeded since Open: the stored value belongs to
// the previous start and must not be reused.
func (s *Store) Incarnation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.inc
}
