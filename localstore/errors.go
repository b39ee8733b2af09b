package localstore

import "errors"

// Every error the package returns wraps one of these, with the directory,
// the values involved and, for Pebble failures, Pebble's own error.
var (
	// ErrInvalidOptions is returned by Open when Options lack a node ID or a
	// cluster ID: a store without them could not later refuse a wrong node (S2).
	ErrInvalidOptions = errors.New("localstore: invalid options")

	// ErrWrongNode is returned by Open when the directory's identity names
	// another node ID. The directory is left untouched (S2).
	ErrWrongNode = errors.New("localstore: directory belongs to another node")

	// ErrWrongCluster is returned by Open when the directory's identity names
	// another cluster (lock domain). The directory is left untouched (S2).
	ErrWrongCluster = errors.New("localstore: directory belongs to another cluster")

	// ErrMissingIdentity is returned by Open when the directory is not empty
	// but holds no identity record. It is never taken for a fresh start: a
	// store that lost its identity may still hold promises (S1, S2).
	ErrMissingIdentity = errors.New("localstore: directory has no store identity")

	// ErrCorrupt is returned by Open, LoadEpochState, GatePassed and
	// BumpIncarnation when the durable state is damaged: a record or key
	// that cannot be decoded or has a record version this build does not
	// know, a checksum Pebble found wrong (WAL, MANIFEST, sstable), or a
	// database that lost acknowledged writes or whose counter file does not
	// match it (S4). The message says what was found and what the operator
	// can do: restore the directory from a copy taken after the node last
	// stopped, or remove it and join as a new member. Nothing is reset or
	// rolled back.
	ErrCorrupt = errors.New("localstore: durable state is corrupt")

	// ErrDataDirInUse is returned by Open when another Store, in this
	// process or another, holds the directory. The message names the
	// holder's pid when its pid file is readable.
	ErrDataDirInUse = errors.New("localstore: data dir in use")

	// ErrEpochRegression is returned by Commit for a Learned epoch older than
	// the stored one; nothing of that Commit is written (S3).
	ErrEpochRegression = errors.New("localstore: learned epoch would go back")

	// ErrEpochConflict is returned by Commit for a Learned epoch with the
	// stored number but another value (digest): two epochs chosen for one
	// number means agreement forked, and the store refuses to pick one.
	ErrEpochConflict = errors.New("localstore: learned epoch conflicts with the stored one")

	// ErrInvalidWrite is returned by Commit for a record that breaks its own
	// rules (an accepted value without an accepted ballot, a gate-passed
	// marker for an epoch not learned). Nothing of that Commit is written.
	ErrInvalidWrite = errors.New("localstore: invalid write")

	// ErrIncarnationExhausted is returned by BumpIncarnation when the counter
	// is at its maximum; reusing a value would let tokens repeat.
	ErrIncarnationExhausted = errors.New("localstore: incarnation counter exhausted")

	// ErrFailed is returned by every write after a write returned an error:
	// what reached the disk is then unknown, so the store stops taking writes
	// until it is reopened and read back. (A failed WAL sync never gets this
	// far: Pebble treats it as fatal and the store's logger panics.)
	ErrFailed = errors.New("localstore: an earlier write failed; reopen the store")

	// ErrDiskFull is returned by Open when the directory's file system has
	// less free space than reopening the store needs: Pebble first turns its
	// write-ahead log into a table, and on a full disk it would retry that
	// forever instead of failing. The error also wraps syscall.ENOSPC.
	ErrDiskFull = errors.New("localstore: not enough free disk space")

	// ErrClosed is returned by every method called after Close, and by a
	// second Close.
	ErrClosed = errors.New("localstore: store is closed")
)
