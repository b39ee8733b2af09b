package homelock

import (
	"errors"

	"github.com/homelock/homelock/fence"
)

// The errors homelock returns. Every error a Node returns wraps one of these
// (match with errors.Is) and names the key, and the token or the reason.
var (
	// ErrLockUnavailable is returned by Lock, TryLock and LockAll when the
	// cluster cannot arbitrate the key right now: no epoch is learned, this
	// node or the requester is not a member, the members run different
	// protocol versions, or the key's home has no epoch liveness or is in its
	// activation gate until the deadline. Retryable (a 503 in HTTP terms).
	ErrLockUnavailable = errors.New("homelock: lock unavailable")

	// ErrTooManyDelegations is returned by Lock, TryLock and LockAll when the
	// key's home refused the request because a delegation cap
	// (Config.MaxDelegations, Config.MaxPerRequester) or its waiter cap was
	// reached. Nothing was evicted to make room. Retryable.
	ErrTooManyDelegations = errors.New("homelock: too many delegations")

	// ErrTimeout is returned by Lock and LockAll when the wait (WithWait,
	// Config.DefaultWait, or the context's deadline) ran out while the request
	// was still queued behind another holder, and by TryLock when the key
	// cannot be had without queueing (a 423 in HTTP terms).
	ErrTimeout = errors.New("homelock: timed out waiting for lock")

	// ErrLeaseExpired is returned by Handle.Valid once the critical section's
	// lease ran out on this node's clock, the delegation was lost, or the
	// handle was unlocked. A write staged under the handle must not commit
	// (a 409 in HTTP terms).
	ErrLeaseExpired = errors.New("homelock: lease expired")

	// ErrClosed is returned by every Node method after Close (or after the
	// node's store failed, which stops it), and by Lock calls that were
	// waiting when Close began.
	ErrClosed = errors.New("homelock: node closed")

	// ErrStoreFailed is what Node.Err wraps once the node's store refused a
	// write: the node has stopped for good and left gossip. Not retryable
	// on this Node.
	ErrStoreFailed = errors.New("homelock: store failed")

	// ErrHookFailed is returned by Lock when the store's WaitFresh hook failed
	// for the delegation the locker waited on: its replica could not catch up
	// with the previous holder's writes, so nothing was admitted. Retryable.
	ErrHookFailed = errors.New("homelock: store hook failed")

	// ErrInvalidOption is returned by Lock, TryLock and LockAll for a
	// LockOption outside its range (a WithLease that is not positive, a
	// negative WithWait, an unknown scope); the message names the option
	// and its value. Not retryable.
	ErrInvalidOption = errors.New("homelock: invalid lock option")

	// ErrDuplicateNodeID is returned by Open (and Join) when a member refused
	// this node's join because the epoch holds its node ID with another store
	// that is alive in gossip: two processes were given one ID. The live
	// node keeps its membership; this one stops. A node whose old store is
	// really gone (a wiped disk) is not refused once gossip agrees it down.
	ErrDuplicateNodeID = errors.New("homelock: another live node has this node ID")

	// ErrInvalidConfig is returned by Config.Validate and Open; the message
	// lists every violation with the field and its value.
	ErrInvalidConfig = errors.New("homelock: invalid config")
)

// The resource-side errors of fence.Guard, re-exported so that a store
// embedding homelock can match them without importing fence.
var (
	// ErrStaleOwner: a mutation's token is below the highest the resource
	// accepted; a newer owner has written since.
	ErrStaleOwner = fence.ErrStaleOwner
	// ErrFenceRegression: the resource saw the same token under a different
	// grant; the lock service lost state.
	ErrFenceRegression = fence.ErrFenceRegression
	// ErrBadGrant: a grant is malformed, forged, or does not bind the
	// mutation's resource, owner and operation.
	ErrBadGrant = fence.ErrBadGrant
	// ErrQuarantined: an accepted segment was resent with another payload.
	ErrQuarantined = fence.ErrQuarantined
)
