package localstore

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/homelock/homelock/msg"
)

// create writes a new identity, synced, into a database Open just created.
// If the process dies before the sync, the directory is left with Pebble files
// and no identity, and the next Open refuses it (ErrMissingIdentity); that
// directory never acknowledged anything, which the error says.
func (s *Store) create(opts Options) error {
	s.id = Identity{NodeID: opts.NodeID, StoreID: newStoreID(), ClusterID: opts.ClusterID}
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
	if c.learned != nil {
		s.learned = learnedMark{ok: true, number: c.learned.Epoch.Number, digest: c.learned.Epoch.Digest()}
	}
	s.log.Info("opened store", "store", msg.FormatStore(id.StoreID), "cluster", id.ClusterID,
		"incarnation", c.incarnation, "learned", s.learned.number, "acceptor_records", len(c.acceptor))
	return nil
}
