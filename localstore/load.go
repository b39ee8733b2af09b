package localstore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/homelock/homelock/epoch"
)

// LoadEpochState returns the epoch machine's durable state: the acceptor
// records in instance order and the learned epoch (nil if none). It never
// returns an acceptor record at or below the learned epoch's number: those
// instances are decided and their records are pruned.
func (s *Store) LoadEpochState() (epoch.State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return epoch.State{}, err
	}
	var st epoch.State
	v, err := s.get(learnedKey)
	if err != nil {
		return epoch.State{}, err
	}
	if v != nil {
		l, err := decodeLearned(v)
		if err != nil {
			return epoch.State{}, s.corrupt(err)
		}
		st.Learned = &l
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixAcceptor},
		UpperBound: []byte{prefixAcceptor + 1},
	})
	if err != nil {
		return epoch.State{}, s.readErr(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return epoch.State{}, s.readErr(err)
		}
		r, err := decodeAcceptorAt(it.Key(), v)
		if err != nil {
			return epoch.State{}, s.corrupt(fmt.Errorf("key %x: %w", it.Key(), err))
		}
		st.Acceptor = append(st.Acceptor, r)
	}
	if err := it.Error(); err != nil {
		return epoch.State{}, s.readErr(err)
	}
	return st, nil
}

// GatePassed reports whether the activation gate of epoch epochNumber was
// recorded as fully passed (docs/design.md, "Restarts and reclaim", condition (i)).
func (s *Store) GatePassed(epochNumber uint64) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return false, err
	}
	k := gatePassedKey(epochNumber)
	v, err := s.get(k)
	if err != nil || v == nil {
		return false, err
	}
	if _, err := decodeGatePassedAt(k, v); err != nil {
		return false, s.corrupt(fmt.Errorf("key %x: %w", k, err))
	}
	return true, nil
}

// get returns a copy of k's value, or nil if k is absent.
func (s *Store) get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.readErr(fmt.Errorf("key %x: %w", k, err))
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}
