package home

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// Config configures one node's home machine. The root package fills it from
// homelock.Config; the simulator fills it directly.
type Config struct {
	// Self is this node; Inc its incarnation (bumped and synced at start).
	Self msg.Member
	Inc  uint64
	// EpochLease and Skew size the activation and restart gates.
	EpochLease time.Duration
	Skew       time.Duration
	// MaxLease caps a delegation's lease; MinUseful is the shortest lease worth
	// granting (a home with less liveness left queues instead).
	MaxLease  time.Duration
	MinUseful time.Duration
	// RetryInterval is how often requesters resend; a waiter unheard for
	// StaleWaiters × RetryInterval is dropped, and DrainQueries and reclaims
	// are resent at this pace.
	RetryInterval time.Duration
	// MaxDelegations caps live delegations on this home and MaxPerRequester
	// those held by one requester; MaxWaiters caps one key's queue. At a cap
	// new requests are refused, nothing is evicted.
	MaxDelegations  int
	MaxPerRequester int
	MaxWaiters      int
	// Sign returns the signed lockGrant.v1 for a delegation; nil signs nothing.
	Sign func(g GrantInfo) []byte
	// Mutations switch safety rules off in tests; never set outside them.
	Mutations Mutations
}

// StaleWaiters is how many retry intervals a waiter may stay silent.
const StaleWaiters = 4

// GrantInfo is what a home binds into a signed grant.
type GrantInfo struct {
	Key    string
	Holder msg.Member
	Req    msg.RequestID
	Token  fence.Token
	Epoch  uint64
	Lease  time.Duration
}

// Mutations are test-only switches that break one rule each, so that tests can
// show the checkers catch the break. The zero value is the correct protocol.
type Mutations struct {
	// GrantMovedAtOnce skips the activation gate of a key that moved in.
	GrantMovedAtOnce bool
	// NoGateCarry drops a running gate when the key stays home across epochs (H4).
	NoGateCarry bool
	// LIFO grants the newest waiter first instead of the oldest.
	LIFO bool
	// DrainWhileGated sends Drained without waiting for its own gate (H5, H12).
	DrainWhileGated bool
	// NoRestartGate grants at once after a restart (H2).
	NoRestartGate bool
	// RenewNonMembers keeps renewing delegations of removed members (H14).
	RenewNonMembers bool
	// WaiveRestartWithoutMarker lets a completed reclaim waive the restart
	// gate without the current epoch's gate-passed marker (H19).
	WaiveRestartWithoutMarker bool
	// AcceptStaleDrained lets a Drained for an earlier epoch transition waive
	// the current one (H5: a duplicated old Drained after later epochs).
	AcceptStaleDrained bool
	// NoRenewWhileWaited refuses to renew a delegation others wait for, so
	// a running critical section loses its lock at the lease's end: the
	// rule before held-while-alive, which the simulator's check catches.
	NoRenewWhileWaited bool
	// EchoFirstAttempt makes a Grant echo the first attempt of a request
	// instead of the last one received (H22).
	EchoFirstAttempt bool
}
