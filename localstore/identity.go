package localstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/homelock/homelock/msg"
)

// create writes a new identity, synced, into a database Open just created.
// If the process dies before the sync, the directory is left with Pebble files
// and no identity, and the next Open refuses it (ErrMissingIdentity); that
// directory never acknowledged anything, which the error says.
func (s *Store) create(opts Options) error {
	s.id = Identity{NodeID: opts.NodeID, StoreID: newStoreID(), ClusterID: opts.ClusterID}
	var err error
	if s.counterFile, err = openCounterFile(s.fsys, s.dir, false); err != nil {
		return fmt.Errorf("localstore: create %q: counter file: %w", s.dir, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(identityKey, encodeIdentity(s.id), nil); err != nil {
		return fmt.Errorf("localstore: create %q: %w", s.dir, err)
	}
	if err := s.write(b); err != nil {
		return err
	}
	s.log.Info("created store", "store", msg.FormatStore(s.id.StoreID), "cluster", s.id.ClusterID)
	return nil
}

// newStoreID returns a random non-zero ID; zero is reserved for "no store".
func newStoreID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read crashes the program instead)
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// reopen checks the stored identity against opts, then reads every record
// once so that corruption surfaces at Open.
func (s *Store) reopen(opts Options) error {
	c, err := s.scan()
	if err != nil {
		return err
	}
	if c.identity == nil {
		// The identity is in the first counted write: a counter file that
		// acknowledges any write means it was synced, and then lost.
		st, err := readCounterFile(s.fsys, s.fsys.PathJoin(s.dir, counterFileName), 0)
		if err == nil && st.acked > 0 {
			return s.corrupt(fmt.Errorf("the database holds %d records and no identity, but its counter file "+
				"acknowledges write %d: Pebble lost synced writes", c.records, st.acked))
		}
		if c.records == 0 {
			return fmt.Errorf("%w: %q holds a Pebble database with no records at all; "+
				"most likely the first Open was interrupted before the identity was synced, and the directory "+
				"acknowledged nothing (an operator may remove it)", ErrMissingIdentity, s.dir)
		}
		return fmt.Errorf("%w: %q holds %d records but no identity; refusing to guess whose they are",
			ErrMissingIdentity, s.dir, c.records)
	}
	id := *c.identity
	if id.NodeID != opts.NodeID {
		return fmt.Errorf("%w: %q holds node %q (store %s, cluster %q), opened as node %q",
			ErrWrongNode, s.dir, id.NodeID, msg.FormatStore(id.StoreID), id.ClusterID, opts.NodeID)
	}
	if id.ClusterID != opts.ClusterID {
		return fmt.Errorf("%w: %q holds cluster %q (node %q, store %s), opened for cluster %q",
			ErrWrongCluster, s.dir, id.ClusterID, id.NodeID, msg.FormatStore(id.StoreID), opts.ClusterID)
	}
	s.id = id
	if err := s.checkCounter(c.counter); err != nil {
		return err
	}
	if c.learned != nil {
		s.learned = learnedMark{ok: true, number: c.learned.Epoch.Number, digest: c.learned.Epoch.Digest()}
	}
	s.log.Info("opened store", "store", msg.FormatStore(id.StoreID), "cluster", id.ClusterID,
		"incarnation", c.incarnation, "learned", s.learned.number, "acceptor_records", len(c.acceptor),
		"writes", s.counter)
	return nil
}

// checkCounter checks the database's write counter db against the counter
// file (S4, counter.go) and brings the file up to a write a crash left
// between Pebble's sync and its own.
func (s *Store) checkCounter(db uint64) error {
	path := s.fsys.PathJoin(s.dir, counterFileName)
	st, err := readCounterFile(s.fsys, path, s.id.StoreID)
	if errors.Is(err, errCounterForeign) {
		return s.corrupt(err)
	}
	if err != nil {
		return fmt.Errorf("localstore: read %q: %w", path, err)
	}
	if err := checkCounter(path, db, st); err != nil {
		return s.corrupt(err)
	}
	if s.counterFile, err = openCounterFile(s.fsys, s.dir, st.exists); err != nil {
		return fmt.Errorf("localstore: open %q: %w", path, err)
	}
	s.counter = db
	switch {
	case db == 0:
		// A store written before the counter existed: its first counted
		// write starts both copies.
		s.log.Info("starting the write counter")
		b := s.db.NewBatch()
		defer b.Close()
		return s.write(b)
	case st.acked < db:
		s.log.Info("counter file one write behind the database after a crash; bringing it up", "writes", db)
		if err := s.writeCounter(db); err != nil {
			return fmt.Errorf("localstore: write %q: %w", path, err)
		}
	}
	return nil
}
