// Package localstore keeps one node's durable state in Pebble: who the node
// is, how often it has started, what it promised and accepted in epoch
// agreement, which epoch it learned, and which epochs' activation gates it saw
// pass. It also lends its Pebble DB to fence.Guard, under a reserved prefix,
// so a fenced check and the business write it guards commit in one batch.
//
// # What is stored, and why each write is synced
//
// Hn names a hazard schedule, the reason for a rule: docs/design.md lists
// H1–H24 with the rule for each.
//
//   - Identity (node ID, random store ID, cluster ID), written once when the
//     store is created. Members are (node ID, store ID) pairs, so a wiped
//     directory under a reused node ID is a new member that promised nothing
//     (H17).
//   - Incarnation, bumped on every start (BumpIncarnation) before the node
//     sends anything. Tokens and request IDs begin with it; a bump lost in a
//     crash would let a restarted home re-issue a token.
//   - Acceptor records (promise, acceptance), one per agreement instance.
//     An acceptor that forgot a promise or an acceptance after a crash could
//     let two epochs live at once.
//   - The learned epoch with its certificate. A node acts on an epoch only
//     after this is synced (H10).
//   - Gate-passed markers, one per epoch number: condition (i) of a restart
//     without the full gate, and what lets a restarted old home vouch with
//     Drained ("Restarts and reclaim" in docs/design.md; hazard H19).
//   - The write counter: every batch above also stores one more than the
//     last, and the same number is synced into a file of its own beside the
//     database (S4).
//
// Every write is a single Pebble batch committed with pebble.Sync, and the
// method returns only after the sync (and the counter file's). The driver
// writes what a protocol step produced (Commit) and only then sends the
// step's messages, as raft's Ready saves entries before sending.
//
// # Invariants
//
//   - S1: a promise, acceptance, learned epoch, gate marker or incarnation
//     that a call acknowledged (returned without error) survives any crash;
//     one that was in flight is there entirely or not at all.
//   - S2: an identity is never silently reset. Open refuses a directory of
//     another node (ErrWrongNode) or cluster (ErrWrongCluster), a corrupt or
//     unknown record (ErrCorrupt), and a non-empty directory without an
//     identity (ErrMissingIdentity); it creates a store only in a missing or
//     empty directory.
//   - S3: the learned epoch never goes back. Commit refuses an older one
//     (ErrEpochRegression) and a different epoch under the stored number
//     (ErrEpochConflict).
//   - S4: a store never opens with less than it acknowledged. A crash loses
//     only what was not yet synced, at most the write in flight, and the
//     store opens; damage to synced data makes Open refuse (ErrCorrupt),
//     never roll back. Pebble alone cannot draw this line: it recovers a
//     WAL cut short, or overwritten in the middle, to its last readable
//     record, exactly as it recovers a tail torn by a crash. So each write
//     carries a counter that is synced into HOMELOCK-COUNTER after Pebble's
//     sync, and Open requires the database to hold that counter or one
//     more (counter.go). Checksums Pebble finds wrong (sstable blocks, a
//     malformed MANIFEST, an older WAL) are ErrCorrupt too. S4 covers
//     localstore's records only: fence.Guard's, written into the same
//     database with the embedder's own sync choice, are not counted. A
//     store written before the counter existed starts one at its next Open.
//
// Acceptor records at or below the learned epoch number are pruned when it
// advances (and never stored afterwards): those instances are decided, and
// the machine answers them with the learned epoch.
//
// # Key layout
//
// The first byte of a key names its kind; numbers in keys are 8 bytes
// big-endian, so records iterate in numeric order.
//
//	0x01                 identity
//	0x02                 incarnation
//	0x03 ‖ instance      acceptor record for that agreement instance
//	0x04                 learned epoch and certificate
//	0x05 ‖ epoch number  gate-passed marker
//	0x06                 write counter (S4)
//	0x07                 gossip addresses of the epoch's members (advisory)
//	0x08 … 0x7f          reserved for localstore; Open refuses unknown keys here
//	0x80 …               fence.Guard's records (GuardPrefix); never read here
//	0x81 … 0xff          unassigned
//
// Values start with a version byte; records.go documents each encoding. The
// decoders accept exactly what the encoders write, so fuzzing checks both
// directions.
//
// # Files beside Pebble's
//
//	LOCK              Pebble's directory lock, which Open takes before it reads
//	                  anything; a second Open is ErrDataDirInUse
//	HOMELOCK-PID      the lock holder's pid, for that error's message only
//	HOMELOCK-COUNTER  the write counter (S4): two checksummed slots a block
//	                  apart, so a crash that tears one leaves the other
//
// A directory holding only LOCK and HOMELOCK-PID counts as empty. Copy the
// whole directory, with the node stopped, to back it up.
//
// # When Open refuses
//
//   - ErrDataDirInUse: another node (the pid is in the message) runs on the
//     directory. Stop it, or give this node its own directory.
//   - ErrCorrupt: the state is damaged (the message says where: a record, a
//     Pebble checksum, the database behind its counter file, or the counter
//     file missing, stale or another store's). The node must not run on it:
//     an acceptor that forgot a promise could let two epochs live. Restore
//     the directory from a copy taken after the node last stopped (an older
//     copy is the same forgetful acceptor), or remove it and start the node
//     with Join: it comes back as a new member (a new store ID) that made no
//     promises.
//   - ErrMissingIdentity: a non-empty directory without a store; most often
//     a first start that crashed before the identity was synced, which the
//     message says. Such a directory acknowledged nothing and may be removed.
//   - ErrWrongNode, ErrWrongCluster: the directory is another node's or
//     another cluster's; check the configuration.
//
// If creating a store fails, Open removes what it created; Discard does the
// same for a store whose node failed to start before it sent anything.
// Nothing else is ever removed, reset or repaired by this package.
//
// # Use
//
//	s, err := localstore.Open(dir, localstore.Options{NodeID: id, ClusterID: domain})
//	inc, err := s.BumpIncarnation()  // once per start, before sending anything
//	st, err := s.LoadEpochState()    // feed to the epoch machine
//	...
//	err = s.Commit(localstore.Writes{Acceptor: recs, Learned: l}) // then send
//
// A Store is safe for concurrent use. A write that fails leaves the disk in an
// unknown state, so the Store then refuses writes (ErrFailed) until reopened.
// Pebble itself treats a failed WAL write or sync as fatal; the store turns
// Pebble's Fatalf into a crash of the process (an unrecovered panic on a
// goroutine of its own, so no deferred code of the caller runs), and such a
// Commit never returns (never acknowledges). During Open a fatal error is
// returned instead, and Open refuses a store whose disk lacks the room to
// reopen it (ErrDiskFull) rather than letting Pebble retry forever.
package localstore
