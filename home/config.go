package home

import (
	"strconv"
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
	// Mutations switch safety rules off in tests built with the
	// homelock_mutations tag; in any other build it is empty.
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

// Fence is the lockGrant.v1 a home signs for g: bound to the key, the
// holder's node ID, the request, the delegation's token, the lock domain
// and the operation a fence.Guard checks. The driver and the simulator
// both sign this, so the simulator's homes sign what production's do.
func (g GrantInfo) Fence(domain, operation string) fence.Grant {
	return fence.Grant{
		Resource:    g.Key,
		Owner:       string(g.Holder.ID),
		RequestID:   strconv.FormatUint(g.Req.Inc, 10) + "." + strconv.FormatUint(g.Req.Seq, 10),
		Lease:       g.Token.String(),
		Token:       g.Token,
		IssuerEpoch: g.Epoch,
		Domain:      domain,
		TTL:         g.Lease,
		Operation:   operation,
		Scope:       fence.ScopeCluster,
	}
}
