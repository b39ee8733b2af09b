package localstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Store is one node's durable state. Its methods are safe for concurrent use;
// writes (Commit, BumpIncarnation) are serialized so that the learned-epoch
// check and the write it guards are one step (S3).
type Store struct {
	dir  string
	fsys vfs.FS
	db   *pebble.DB
	id   Identity
	log  *slog.Logger
	// lock is Pebble's directory lock, taken before the directory is read
	// and released after everything else is closed.
	lock *pebble.Lock
	// created is the topmost directory this Open made ("" if dir existed);
	// fresh says this Open created the store. Together: what Discard removes.
	created string
	fresh   bool
	// writeOpts is pebble.Sync; only the crash test's negative control swaps
	// it, to show that the test notices a write that was not synced.
	writeOpts *pebble.WriteOptions
	// opening is set while Pebble opens: its Fatalf then comes back from
	// Open as an error instead of crashing the process (pebbleLogger).
	opening atomic.Bool

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
	// counter is the write counter of the last write, held by Pebble and by
	// counterFile both (S4, counter.go).
	counter     uint64
	counterFile vfs.File
}

type learnedMark struct {
	ok     bool
	number uint64
	digest uint64
}

// Open opens the store in dir, creating it if dir is missing or empty.
//
// Creating makes a new identity (opts.NodeID, a random StoreID,
// opts.ClusterID) and syncs it before Open returns; if creating fails, Open
// removes what it made. Reopening checks that identity against opts, reads
// and decodes every record once and checks the write counter (S4), so a
// corrupt store fails here (ErrCorrupt) rather than mid-protocol. Open never
// resets or repairs a directory (S2): a foreign, corrupt or identity-less
// directory is an error naming it, and what to do is the operator's
// decision. A directory another Store holds is ErrDataDirInUse.
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

	created, err := makeDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("localstore: open %q: %w", dir, err)
	}
	// A lost race for the lock leaves what makeDir made: the winner may
	// have made it too, and is using it.
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, fsys: fsys, log: log, lock: lock, created: created, writeOpts: pebble.Sync}
	if err := s.open(opts); err != nil {
		return nil, errors.Join(err, s.release(s.fresh))
	}
	return s, nil
}

func (s *Store) open(opts Options) error {
	fresh, err := isEmptyDir(s.fsys, s.dir)
	if err != nil {
		return fmt.Errorf("localstore: open %q: %w", s.dir, err)
	}
	s.fresh = fresh
	if !fresh {
		if err := s.checkFreeSpace(); err != nil {
			return err
		}
	}
	bg := &backgroundErrors{log: s.log, now: time.Now}
	s.opening.Store(true)
	s.db, err = openPebble(s.dir, &pebble.Options{
		FS:     s.fsys,
		Logger: pebbleLogger{l: s.log, opening: &s.opening},
		Lock:   s.lock,
		// Pebble's default for a bad checksum found while reading is Fatalf;
		// the read also returns the corruption, which Open and the loaders
		// turn into ErrCorrupt, a refusal that names what to do (S4).
		EventListener: &pebble.EventListener{
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				s.log.Error("pebble found on-disk corruption", "path", info.Path, "err", info.Details)
			},
			BackgroundError: bg.report,
		},
		// Creating only into an empty directory, and opening only an existing
		// database otherwise, keeps a half-created or foreign directory from
		// ever becoming a fresh store (S2).
		ErrorIfExists:    fresh,
		ErrorIfNotExists: !fresh,
	})
	s.opening.Store(false)
	switch {
	case err == nil:
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		return fmt.Errorf("%w: %q is not empty but holds no Pebble database", ErrMissingIdentity, s.dir)
	case pebble.IsCorruptionError(err):
		return s.corrupt(err)
	case errors.Is(err, fs.ErrNotExist):
		// A crash while the store was being created can leave Pebble's
		// marker naming a manifest that never reached the disk. No
		// identity was ever acknowledged from it, but it is not reset
		// either: an operator decides (S2).
		return fmt.Errorf("%w: %q holds an incomplete Pebble database: %v", ErrMissingIdentity, s.dir, err)
	default:
		return fmt.Errorf("localstore: open %q: %w", s.dir, err)
	}
	if fresh {
		return s.create(opts)
	}
	return s.reopen(opts)
}

// openHeadroom is the free space reopening needs beyond the size of the
// write-ahead logs: a new MANIFEST, OPTIONS file and log, and the incarnation
// the node bumps at once.
const openHeadroom = 1 << 20

// checkFreeSpace refuses to reopen a store on a file system without room to
// turn its write-ahead logs into a table: Pebble's Open does that first,
// retries a failed flush at once and forever, and so on a full disk would
// never return (a node restarted on one spun at 120% CPU). A file system that
// cannot tell its free space is not checked.
func (s *Store) checkFreeSpace() error {
	du, err := s.fsys.GetDiskUsage(s.dir)
	if err != nil {
		return nil
	}
	names, err := s.fsys.List(s.dir)
	if err != nil {
		return fmt.Errorf("localstore: open %q: %w", s.dir, err)
	}
	var logs uint64
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if fi, err := s.fsys.Stat(s.fsys.PathJoin(s.dir, name)); err == nil {
			logs += uint64(fi.Size())
		}
	}
	if need := logs + openHeadroom; du.AvailBytes < need {
		return fmt.Errorf("%w: %q has %d bytes free, reopening it needs %d (its write-ahead log of %d bytes becomes a table first): free space and start again: %w",
			ErrDiskFull, s.dir, du.AvailBytes, need, logs, syscall.ENOSPC)
	}
	return nil
}

// openPebble is pebble.Open, but a fatal error inside it (the store's
// opening flag set) comes back as an error: Pebble calls Fatalf when it cannot write its MANIFEST, as on a full
// disk, and by the time the panic reaches here its Open has closed what it
// opened and returned no DB, so there is nothing left running to stop. Any
// other panic goes on.
func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(pebbleFatal)
			if !ok {
				panic(r)
			}
			db, err = nil, f
		}
	}()
	return pebble.Open(dir, o)
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
	return s.release(false)
}

// Discard closes the store and, if this Open created it, removes it: the
// directories Open made, or else every file in the directory that was empty.
// A store that existed before Open is only closed. A node calls it when its
// start fails before it sent anything, so that a failed first start leaves
// nothing behind; a node that may have promised something keeps its store
// (S1).
func (s *Store) Discard() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return s.release(s.fresh)
}

// release closes what Open opened, removes the store if remove is set, and
// gives up the directory lock last, so that no other Open finds a
// half-removed directory.
func (s *Store) release(remove bool) error {
	var errs []error
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("localstore: close %q: %w", s.dir, err))
		}
	}
	if s.counterFile != nil {
		errs = append(errs, s.counterFile.Close())
	}
	if remove {
		if err := s.remove(); err != nil {
			errs = append(errs, fmt.Errorf("localstore: remove %q: %w", s.dir, err))
		} else {
			s.log.Info("removed the store this start created")
		}
	} else if err := s.fsys.Remove(s.fsys.PathJoin(s.dir, pidFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, s.lock.Close())
	return errors.Join(errs...)
}

// remove deletes what this Open created (lock held).
func (s *Store) remove() error {
	if s.created != "" {
		return s.fsys.RemoveAll(s.created)
	}
	names, err := s.fsys.List(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, s.fsys.RemoveAll(s.fsys.PathJoin(s.dir, n)))
	}
	return errors.Join(errs...)
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

// write applies b, with the next write counter, synced, then writes the
// counter to the counter file (S4). Any failure makes the store refuse
// further writes.
func (s *Store) write(b *pebble.Batch) error {
	n := s.counter + 1
	if err := b.Set(counterKey, encodeCounter(n), nil); err != nil {
		return s.batchErr(err)
	}
	err := b.Commit(s.writeOpts)
	if err == nil {
		// A crash or failure from here on leaves the counter file one write
		// behind the database, which the next Open accepts and repairs.
		if err = s.writeCounter(n); err != nil {
			err = fmt.Errorf("counter file: %w", err)
		}
	}
	if err != nil {
		s.failed = err
		s.log.Error("write failed; store refuses further writes", "err", err)
		return fmt.Errorf("localstore: write to %q: %w", s.dir, err)
	}
	s.counter = n
	return nil
}

// corrupt wraps ErrCorrupt and err with what the operator can do.
func (s *Store) corrupt(err error) error {
	return fmt.Errorf("%w: %q: %w; %s", ErrCorrupt, s.dir, err, corruptAdvice)
}

const corruptAdvice = "the node must not start from this directory, or it could break a promise it made: " +
	"restore the directory from a copy taken after the node last stopped, " +
	"or remove it and start the node with Join (--join) to come back as a new member"

// readErr is a failed read: corruption if Pebble says so (a checksum
// mismatch), an I/O error otherwise.
func (s *Store) readErr(err error) error {
	if pebble.IsCorruptionError(err) {
		return s.corrupt(err)
	}
	return fmt.Errorf("localstore: read %q: %w", s.dir, err)
}
