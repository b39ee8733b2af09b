package fence

import "errors"

// Every error this package returns matches one of these with errors.Is. Errors
// about a mutation are wrapped with its resource and token so a log line names
// both without the caller adding them.
var (
	// ErrBadToken is returned by ParseToken and Token.UnmarshalBinary for input
	// that is not exactly one token's encoding.
	ErrBadToken = errors.New("fence: malformed token")

	// ErrBadGrant is returned by KeyRing.Verify, DecodeGrant and Guard.Apply for
	// a grant that is malformed, signed by an unknown or retired key, fails its
	// MAC, or does not bind the mutation's resource, owner and operation (a
	// proof replayed on another resource lands here). F3.
	ErrBadGrant = errors.New("fence: bad grant")

	// ErrRevoked is returned by KeyRing.Verify and Guard.Apply for an authentic
	// grant whose issuer epoch is on the key ring's revocation list.
	ErrRevoked = errors.New("fence: issuer epoch revoked")

	// ErrStaleOwner is returned by Guard.Apply for a token below the highest
	// fence the resource accepted: a newer owner has written since (F1).
	ErrStaleOwner = errors.New("fence: stale owner")

	// ErrFenceRegression is returned by Guard.Apply when the issuer provably
	// minted one token twice: the token is one the resource already accepted,
	// but under a different grant. It means the lock service lost state (an old
	// coordination snapshot was restored); the highest fence is never reset to
	// let such tokens through.
	ErrFenceRegression = errors.New("fence: fence regression")

	// ErrQuarantined is returned by Guard.Apply for an already accepted segment
	// (same token and segment number) resent with a different payload or
	// operation ID. The conflicting mutation is kept for an operator
	// (Guard.Quarantined); the accepted one stands.
	ErrQuarantined = errors.New("fence: conflicting segment quarantined")

	// ErrSegmentOrder is returned by Guard.Apply for a segment that is not the
	// next one: a higher fence must start at segment 1, an equal fence must
	// continue with the last accepted segment plus one.
	ErrSegmentOrder = errors.New("fence: segment out of order")

	// ErrDuplicateOp is returned by Guard.Apply for an operation ID that already
	// has a receipt on the resource under another segment or fence. The caller
	// should ask Guard.Receipt whether its write happened instead of resending
	// it under a new fence (F7).
	ErrDuplicateOp = errors.New("fence: operation already accepted")

	// ErrForeignDomain is returned by Guard.Apply, Guard.Bind and Guard.Migrate
	// for a grant or binding from a lock domain other than the one the resource
	// is bound to, and for a node-scope grant where a cluster guarantee is
	// required (F4).
	ErrForeignDomain = errors.New("fence: grant from foreign lock domain")

	// ErrMigrationPending is returned by Guard.Apply for a grant from the domain
	// a resource is migrating to whose token does not yet exceed the highest
	// fence the old domain reached. Writes pause until the new domain's tokens
	// continue above it.
	ErrMigrationPending = errors.New("fence: domain migration pending")

	// ErrEnforced is returned by Guard.SetMode for a resource in enforce mode
	// asked to go to any other mode, and by NewGuard for a shadow default
	// mode on a store whose default was enforce: once a resource refuses
	// stale writers, nothing turns its validation off.
	ErrEnforced = errors.New("fence: resource is enforced; validation cannot be turned off")

	// ErrBadMode is returned by ParseMode, Guard.SetMode and NewGuard for a
	// mode that is neither ModeShadow nor ModeEnforce.
	ErrBadMode = errors.New("fence: unknown mode")

	// ErrNoReceipt is returned by Guard.Receipt when the resource holds no
	// receipt for the operation ID.
	ErrNoReceipt = errors.New("fence: no receipt")

	// ErrPruned is returned by Guard.Receipt and Guard.Reconcile for an
	// operation with no receipt on a resource whose receipts below some fence
	// were pruned (Guard.Prune), when the answer cannot rule out that the
	// operation was accepted under such a fence and its receipt pruned: its
	// outcome is unknown for good, and the caller must not conclude that it
	// never happened.
	ErrPruned = errors.New("fence: receipts pruned; outcome unknown")

	// ErrPruneAboveHighest is returned by Guard.Prune for a fence above the
	// highest the resource accepted: the receipts it keeps must include the
	// last one.
	ErrPruneAboveHighest = errors.New("fence: prune above the highest fence")

	// ErrBadMutation is returned by Guard.Apply for a mutation with a missing
	// field (empty operation ID, segment 0, ...).
	ErrBadMutation = errors.New("fence: malformed mutation")

	// ErrTooLarge is returned for any input over its bound: a grant field, a
	// signed grant, a mutation field, a payload, a key ring file.
	ErrTooLarge = errors.New("fence: input exceeds bound")

	// ErrKeyRingFull is returned by KeyRing.Add, KeyRing.Retire and
	// KeyRing.Revoke when the ring's keys, retired IDs or revoked issuer epochs
	// are at their bound.
	ErrKeyRingFull = errors.New("fence: key ring full")

	// ErrBadKey is returned by KeyRing.Add, KeyRing.Retire and key ring loading
	// for an invalid key ID or secret, a duplicate ID or an unknown one.
	ErrBadKey = errors.New("fence: bad key")

	// ErrNoSigningKey is returned by KeyRing.Sign when the ring has no active
	// key.
	ErrNoSigningKey = errors.New("fence: no active signing key")

	// ErrCorruptRecord is returned by Guard methods when a stored record under
	// the Guard's prefix does not decode; the Guard refuses rather than guess.
	ErrCorruptRecord = errors.New("fence: corrupt stored record")
)
