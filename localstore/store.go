package localstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Store is one node's durable state. Its methods are safe for concurrent use;
// writes (Commit, BumpIncarnation) are serialized so that the learned-epoch
// check and the write it guards are one step (S3).
type Store struct {
	dir string
	db  *pebble.DB
	id  Identity
	log *slog.Logger
	// writeOpts is pebble.Sync; only the crash test's negative control swaps
	// it, to show that the test notices a write that was not synced.
	writeOpts *pebble.WriteOptions

	mu     sync.RWMutex
	closed bool
	// failed is the first write error. After it the disk state is unknown,
	// and the caches below may disagree with it, so writes stop (ErrFailed).
	failed error
	// inc is the incarnation this Store bumped to; 0 until it bumps.
	inc uint64
	// learned caches the stored learned epoch's number and digest, which
	// every Commit checks against (S3).
	learned learnedMark
}

type learnedMark struct {
	ok     bool
	number uint64
	digest uint64
}

// Open opens the store in dir, creating it if dir is missing or empty.
//
// Creating makes a new identity (opts.NodeID, a random StoreID,
// opts.ClusterID) and syncs it before Open returns. Reopening checks that
// identity against opts and reads and decodes every record once, so a
// corrupt store fails here rather than mid-protocol. Open never resets or
// repairs a directory (S2): a foreign, corrupt or identity-less directory is
// an error naming it, and what to do is the operator's decision.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("dir", dir)

	fresh, err := isEmptyDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("localstore: open %q: %w", dir, err)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:     fsys,
		Logger: pebbleLogger{log},
		// Creating only into an empty directory, and opening only an existing
		// database otherwise, keeps a half-created or foreign directory from
		// ever becoming a fresh store (S2).
		ErrorIfExists:    fresh,
		ErrorIfNotExists: !fresh,
	})
	if err != nil {
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("%w: %q is not empty but holds no Pebble database", ErrMissingIdentity, dir)
		}
		if errors.Is(err, fs.ErrNotExist) {
			// A crash while the store was being created can leave Pebble's
			// marker naming a manifest that never reached the disk. No
			// identity was ever acknowledged from it, but it is not reset
			// either: an operator decides (S2).
			return nil, fmt.Errorf("%w: %q holds an incomplete Pebble database: %v", ErrMissingIdentity, dir, err)
		}
		return nil, fmt.Errorf("localstore: open %q: %w", dir, err)
	}
	s := &Store{dir: dir, db: db, log: log, writeOpts: pebble.Sync}
	if fresh {
		err = s.create(opts)
	} else {
		err = s.reopen(opts)
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
}

// isEmptyDir reports whether dir is missing or has no entries.
func isEmptyDir(fsys vfs.FS, dir string) (bool, error) {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(names) == 0, nil
}

// Identity returns the store's identity.
func (s *Store) Identity() Identity { return s.id }

// DB returns the Pebble database, shared with fence.Guard so that a fenced
// check and the business write land in one batch. Guard owns the keys under
// GuardPrefix; localstore never reads or writes them, and Guard must never
// write outside them. The DB is closed by Close, not by its users.
func (s *Store) DB() *pebble.DB { return s.db }

// GuardPrefix returns the first byte(s) reserved for fence.Guard's keys. The
// slice is a copy.
func (s *Store) GuardPrefix() []byte { return []byte{guardPrefix} }

// Close closes the database and waits for Pebble's background work to stop.
// A second Close returns ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("localstore: close %q: %w", s.dir, err)
	}
	return nil
}

// readable and writable are called with s.mu held.
func (s *Store) readable() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Store) writable() error {
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return fmt.Errorf("%w: %q: %v", ErrFailed, s.dir, s.failed)
	}
	return nil
}

// write applies b synced. Any failure makes the store refuse further writes.
func (s *Store) write(b *pebble.Batch) error {
	if err := b.Commit(s.writeOpts); err != nil {
		s.failed = err
		s.log.Error("write failed; store refuses further writes", "err", err)
		return fmt.Errorf("localstore: write to %q: %w", s.dir, err)
	}
	return nil
}
