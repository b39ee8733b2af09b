package delegation

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// Config configures one node's holder machine.
type Config struct {
	Self msg.Member
	Inc  uint64
	// MaxDrift shortens every lease the holder measures, so that the holder
	// always expires before its home (holder first).
	MaxDrift float64
	// MinUseful: a Grant that arrives later than anchor + lease − MinUseful is
	// not used, and no critical section is admitted with less lease left.
	MinUseful time.Duration
	// RetryInterval is how often an unanswered Acquire or Renew is resent.
	RetryInterval time.Duration
	// Lease is the delegation lease to ask for.
	Lease time.Duration
	// Shards splits the keys into this many groups (1 when 0 or less) by
	// ShardOf. TryAdmit and TryUnlockIn read and write only their key's
	// group, so a driver may run them for keys of different groups at once,
	// each under that group's lock, as long as every other call holds all
	// the groups' locks. The machine's decisions do not depend on the
	// count: only the order in which one Tick serves keys due at the very
	// same instant in different groups does.
	Shards int
	// Mutations switch safety rules off in tests built with the
	// homelock_mutations tag; in any other build it is empty.
	Mutations Mutations
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// Admitted: locker may run its critical section until Expires.
	Admitted EventKind = iota + 1
	// Extended: the admitted locker's expiry moved to Expires (a renewal).
	Extended
	// Revoked: the locker's lease ran out (or the delegation was lost); a write
	// under it must not commit.
	Revoked
	// Failed: the locker will not be admitted; Reason says why.
	Failed
	// Settle asks the driver to run the store's barrier hook for (Key, Token)
	// with the inherited Barrier, bounded by Deadline, and report Settled.
	Settle
	// WaitFresh asks the driver to run the store's wait hook for Barrier before
	// the first admission under Token, bounded by Deadline, and report Fresh.
	WaitFresh
)

// Reason says why a locker failed or was revoked.
type Reason uint8

const (
	ReasonTimeout     Reason = iota + 1 // still queued behind a holder at the deadline
	ReasonUnavailable                   // no liveness, gate, not a member, version mismatch, no answer
	ReasonTooMany                       // a delegation cap was reached
	ReasonLeaseExpired
	ReasonHookFailed
)

// Event is one thing the driver must tell a locker or do for the store.
type Event struct {
	Kind EventKind
	// Slot names the admitted critical section (Admitted, Extended,
	// Revoked) within its key's shard while it runs, from 1; a slot is
	// reused once its section ended. A driver may keep what it has for the
	// section at (shard, Slot) instead of looking Locker up.
	Slot     uint32
	Key      string
	Locker   uint64
	Token    fence.Token
	Expires  time.Time
	Signed   []byte
	Barrier  []byte
	Deadline time.Time
	Reason   Reason
	// Detail says more for a human (which home, which refusal); every
	// Revoked has one, which says why the section was lost.
	Detail string
}

// DetailLeaseRanOut is a Revoked event's Detail when the section's own
// lease (shorter than its delegation's) ran out, not the delegation.
const DetailLeaseRanOut = "its lease ran out"

// Output is what the machine asks its driver to do.
type Output struct {
	Msgs   []msg.Envelope
	Events []Event
}

// Stats are the holder's counters and gauges.
type Stats struct {
	Held       int // delegations held now
	Pending    int // keys with an outstanding Acquire
	Deferred   int // lockers queued locally
	Admissions uint64
	LocalFast  uint64 // admissions with zero messages
	Releases   uint64
	Expired    uint64 // delegations that ran out on the holder
	Unused     uint64 // grants not used: released (late, recalled, withdrawn), or meant for the node's wiped old store (H31)
}
