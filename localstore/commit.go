package localstore

import (
	"fmt"
	"math"

	"github.com/homelock/homelock/epoch"
)

// Writes is everything one protocol step must make durable before its
// messages leave (effects as data, as raft's Ready: docs/design.md). Commit writes it as
// one batch, so a crash keeps all of it or none of it.
type Writes struct {
	// Acceptor records replace the stored record for their instance; a later
	// entry for the same instance wins. A record at or below the learned epoch
	// number (after this Commit) is dropped: that instance is decided.
	Acceptor []epoch.AcceptorRecord
	// Learned, if set, is the newly learned epoch with its certificate. It may
	// equal the stored one (no change) but never be older (ErrEpochRegression)
	// or differ under the same number (ErrEpochConflict). Advancing it prunes
	// the acceptor records at or below its number.
	Learned *epoch.Learned
	// GatePassed lists epoch numbers whose activation gate has fully passed
	// (docs/design.md, "Restarts and reclaim", condition (i)). Each must be at most the learned
	// epoch number: a gate starts when its epoch is learned.
	GatePassed []uint64
}

// Empty reports whether w writes nothing.
func (w Writes) Empty() bool {
	return len(w.Acceptor) == 0 && w.Learned == nil && len(w.GatePassed) == 0
}

// Commit writes w in one batch and returns only after it is synced (S1), so
// the caller may send the replies that depend on it as soon as it returns.
// If Commit returns an error, none of w was acknowledged; the caller must not
// send those replies. A refused Commit (ErrEpochRegression, ErrEpochConflict,
// ErrInvalidWrite) writes nothing and the store stays usable; a failed write
// makes later writes return ErrFailed.
func (s *Store) Commit(w Writes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if w.Empty() {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	learned := s.learned
	if w.Learned != nil {
		next := learnedMark{ok: true, number: w.Learned.Epoch.Number, digest: w.Learned.Epoch.Digest()}
		switch {
		case learned.ok && next.number < learned.number:
			// S3: a node that learned e never acts under an epoch below e.
			return fmt.Errorf("%w: %q has learned epoch %d, refusing epoch %d",
				ErrEpochRegression, s.dir, learned.number, next.number)
		case learned.ok && next.number == learned.number && next.digest != learned.digest:
			return fmt.Errorf("%w: %q has learned epoch %d with digest %#x, refusing digest %#x",
				ErrEpochConflict, s.dir, learned.number, learned.digest, next.digest)
		case learned.ok && next.number == learned.number:
			// Already durable; the first certificate is as good as this one.
		default:
			if err := b.Set(learnedKey, encodeLearned(*w.Learned), nil); err != nil {
				return s.batchErr(err)
			}
			// Instances up to the learned number are decided; the machine
			// answers them with the learned epoch, never from a record.
			end := []byte{prefixAcceptor + 1}
			if next.number < math.MaxUint64 {
				end = acceptorKey(next.number + 1)
			}
			if err := b.DeleteRange(acceptorKey(0), end, nil); err != nil {
				return s.batchErr(err)
			}
			learned = next
		}
	}
	for _, r := range w.Acceptor {
		if learned.ok && r.Instance <= learned.number {
			s.log.Debug("dropping acceptor record for a decided instance", "instance", r.Instance, "learned", learned.number)
			continue
		}
		v, err := encodeAcceptor(r)
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrInvalidWrite, s.dir, err)
		}
		if err := b.Set(acceptorKey(r.Instance), v, nil); err != nil {
			return s.batchErr(err)
		}
	}
	for _, n := range w.GatePassed {
		if !learned.ok || n > learned.number {
			return fmt.Errorf("%w: %q: gate-passed marker for epoch %d, but the learned epoch is %d",
				ErrInvalidWrite, s.dir, n, learned.number)
		}
		if err := b.Set(gatePassedKey(n), encodeGatePassed(n), nil); err != nil {
			return s.batchErr(err)
		}
	}
	if b.Empty() {
		return nil
	}
	if err := s.write(b); err != nil {
		return err
	}
	s.learned = learned
	return nil
}

func (s *Store) batchErr(err error) error {
	return fmt.Errorf("localstore: build batch for %q: %w", s.dir, err)
}
