package msg

import (
	"time"

	"github.com/homelock/homelock/fence"
)

// Envelope is one message between two nodes. The header lets every receiver
// find out, before it looks at the body, whether the sender is behind or ahead
// on epochs, which incarnation of the sender wrote it, and which protocol
// version it speaks.
type Envelope struct {
	From Member
	// FromInc is the sender's incarnation: replies from an incarnation below
	// one that reclaimed are discarded (H1, H11).
	FromInc uint64
	To      NodeID
	// Epoch and Digest are the sender's learned epoch when it sent.
	Epoch   uint64
	Digest  uint64
	Version uint32
	Body    Body
}

// Kind names a message type; transport counters and traces use it.
type Kind uint8

// Message kinds. The numbering is part of the wire format: append only.
const (
	KindInvalid Kind = iota
	KindPrepare
	KindPromise
	KindAccept
	KindAccepted
	KindLearn
	KindEpochQuery
	KindRenewal
	KindRenewalAnswer
	KindJoin
	KindLeave
	KindAcquire
	KindGrant
	KindWait
	KindNotHome
	KindRefused
	KindRecall
	KindRelease
	KindRenew
	KindRenewReply
	KindWithdraw
	KindReclaim
	KindReclaimAnswer
	KindDrainQuery
	KindDrained
	KindGateRemaining
	kindCount
)

var kindNames = [...]string{
	"invalid", "prepare", "promise", "accept", "accepted", "learn", "epoch_query",
	"renewal", "renewal_answer", "join", "leave", "acquire", "grant", "wait",
	"not_home", "refused", "recall", "release", "renew", "renew_reply", "withdraw",
	"reclaim", "reclaim_answer", "drain_query", "drained", "gate_remaining",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds lists every valid kind, for per-kind counters.
func Kinds() []Kind {
	ks := make([]Kind, 0, kindCount-1)
	for k := KindPrepare; k < kindCount; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Body is one message's content. The set of bodies is closed.
type Body interface {
	Kind() Kind
}

// --- Epoch agreement (one single-decree instance per epoch number) ---

// Prepare asks acceptors to promise ballot for the instance choosing epoch Instance.
type Prepare struct {
	Instance uint64
	Ballot   Ballot
}

// Promise answers Prepare. OK is false when the acceptor had promised a higher
// ballot (Promised says which). Accepted and Value report what it accepted.
type Promise struct {
	Instance uint64
	Ballot   Ballot
	OK       bool
	Promised Ballot
	Accepted Ballot
	Value    *Epoch
}

// Accept asks acceptors to accept Value at Ballot.
type Accept struct {
	Instance uint64
	Ballot   Ballot
	Value    Epoch
}

// Accepted answers Accept.
type Accepted struct {
	Instance uint64
	Ballot   Ballot
	OK       bool
	Promised Ballot
}

// Learn announces a chosen epoch with its certificate. It also answers
// EpochQuery and stands in for EpochUpdate: a side that is behind receives it
// and nothing else happens.
type Learn struct {
	Epoch Epoch
	Cert  Certificate
}

// EpochQuery asks the receiver for its learned epoch (sent by a node that saw
// a newer epoch number in a header).
type EpochQuery struct{}

// Renewal is one round of epoch liveness for the sender's epoch (header).
type Renewal struct {
	Nonce uint64
}

// RenewalResult is an acceptor's answer to a renewal round.
type RenewalResult uint8

const (
	RenewalOK RenewalResult = iota + 1
	RenewalPromisedHigher
	RenewalNewerEpoch
	RenewalNotMember
	RenewalUnknownEpoch
)

// RenewalAnswer answers Renewal with the round's nonce.
type RenewalAnswer struct {
	Nonce  uint64
	Result RenewalResult
	// Promised is the instance the acceptor promised (with PromisedHigher).
	Promised uint64
}

// Join asks a member to propose an epoch that adds Member.
type Join struct{ Member Member }

// Leave asks a member to propose an epoch without Member.
type Leave struct{ Member Member }

// --- Delegations ---

// RequestID names one acquisition request; it only grows per requester, also
// across restarts, because Inc is the requester's incarnation (H6).
type RequestID struct {
	Inc uint64
	Seq uint64
}

// Less orders request IDs.
func (r RequestID) Less(o RequestID) bool {
	if r.Inc != o.Inc {
		return r.Inc < o.Inc
	}
	return r.Seq < o.Seq
}

// Acquire asks K's home for a delegation. Attempt numbers the resends of one
// request; the Grant echoes the attempt the home had last received.
type Acquire struct {
	Key     string
	Req     RequestID
	Attempt uint32
	Lease   time.Duration
	// Queued (protocol v2) is set on the first attempt of a request sent in
	// the step that released the key's delegation to waiters (it was
	// contended or recalled): the requester knows it queues behind a
	// holder, so the home leaves out the Wait{holder} that would only say
	// so. It is advice about a reply, never about the queue: the home
	// queues and grants the request exactly as without it.
	Queued bool
}

// Grant hands the requester a delegation.
type Grant struct {
	Key     string
	Req     RequestID
	Attempt uint32
	Token   fence.Token
	Lease   time.Duration
	Barrier []byte
	// Recalled is set on a re-sent Grant when the home has recalled it since:
	// the holder admits the one local critical section at the head of its
	// queue, as under Contended, then drains.
	Recalled bool
	// Contended is set when other nodes already wait: the holder admits the
	// one local critical section at the head of its queue, then drains. It
	// replaces a Recall that could overtake the Grant and leave the holder
	// with nothing admitted (every contender must progress).
	Contended bool
	// Signed is the home's signed lockGrant.v1 for this delegation (may be empty
	// when the home has no key ring).
	Signed []byte
}

// WaitReason says what a queued request waits for. The requester's error at
// its deadline depends on it: behind a holder is ErrTimeout, the rest are
// ErrLockUnavailable.
type WaitReason uint8

const (
	WaitHolder   WaitReason = iota + 1 // another node holds the delegation
	WaitGate                           // the key's activation gate is running
	WaitLiveness                       // the home has no epoch liveness
)

// Wait tells a requester that its request is queued.
type Wait struct {
	Key     string
	Req     RequestID
	Attempt uint32
	Reason  WaitReason
}

// NotHome tells a requester that the receiver is not K's home in the
// receiver's epoch (which the header names).
type NotHome struct {
	Key string
	Req RequestID
}

// RefuseReason says why a home refused a request outright.
type RefuseReason uint8

const (
	RefusedNotMember RefuseReason = iota + 1
	RefusedVersion
	RefusedTooManyDelegations
	RefusedBadRequest
	// RefusedDuplicateID answers a Join (Key empty) under a node ID whose
	// member in the epoch has another store and is alive in gossip.
	RefusedDuplicateID
)

func (r RefuseReason) String() string {
	switch r {
	case RefusedNotMember:
		return "not a member of the home's epoch"
	case RefusedVersion:
		return "protocol version mismatch"
	case RefusedTooManyDelegations:
		return "delegation cap reached"
	case RefusedBadRequest:
		return "malformed request"
	case RefusedDuplicateID:
		return "another live node has this node ID"
	}
	return "unknown reason"
}

// Refused tells a requester that its request will not be served.
type Refused struct {
	Key    string
	Req    RequestID
	Reason RefuseReason
}

// Recall asks the holder of Token to drain and release it.
type Recall struct {
	Key   string
	Token fence.Token
}

// Release gives back the delegation Token with the store's barrier.
type Release struct {
	Key     string
	Token   fence.Token
	Barrier []byte
}

// Renew asks to extend delegation Token; Attempt numbers renew sends so the
// holder can anchor the extension at the send that the reply echoes.
type Renew struct {
	Key     string
	Token   fence.Token
	Attempt uint32
	Lease   time.Duration
}

// RenewReply answers Renew. !OK counts as a Recall.
type RenewReply struct {
	Key     string
	Token   fence.Token
	Attempt uint32
	OK      bool
	Lease   time.Duration
}

// Withdraw cancels request Req: its local lockers all gave up.
type Withdraw struct {
	Key string
	Req RequestID
}

// Reclaim is sent by a restarted node (header FromInc) to every member: which
// delegations from my earlier incarnations do you hold?
type Reclaim struct{}

// HeldDelegation is one delegation reported in ReclaimAnswer.
type HeldDelegation struct {
	Key       string
	Token     fence.Token
	Remaining time.Duration
	Barrier   []byte
}

// ReclaimAnswer answers Reclaim; ForInc is the reclaiming incarnation.
type ReclaimAnswer struct {
	ForInc uint64
	Held   []HeldDelegation
}

// DrainQuery is sent by K's gated new home in epoch To to K's home in From.
type DrainQuery struct {
	Key         string
	From, To    uint64
	ReceiverInc uint64
}

// Drained vouches that K's home in From has stopped granting K and holds no
// live delegation for it but Live, if set; Barrier is the last released
// barrier (Live's inherited one while it runs).
type Drained struct {
	Key         string
	From, To    uint64
	ReceiverInc uint64
	Barrier     []byte
	// Live is the one delegation for K still live at the old home, handed to
	// the new home so that a critical section running under it outlives the
	// move (lock protocol v3). Nil when none is live.
	Live *HandedOver
}

// HandedOver is a live delegation an old home hands to the key's new home
// in Drained: whom it names, and how long the old home still counts it live
// from the send (its own expiry, Skew included).
type HandedOver struct {
	Token     fence.Token
	Holder    Member
	HolderInc uint64
	Lease     time.Duration
	Remaining time.Duration
}

// GateRemaining answers a DrainQuery that cannot be vouched for yet: ask
// again after Remaining (measured from receipt).
type GateRemaining struct {
	Key         string
	From, To    uint64
	ReceiverInc uint64
	Remaining   time.Duration
}

func (Prepare) Kind() Kind       { return KindPrepare }
func (Promise) Kind() Kind       { return KindPromise }
func (Accept) Kind() Kind        { return KindAccept }
func (Accepted) Kind() Kind      { return KindAccepted }
func (Learn) Kind() Kind         { return KindLearn }
func (EpochQuery) Kind() Kind    { return KindEpochQuery }
func (Renewal) Kind() Kind       { return KindRenewal }
func (RenewalAnswer) Kind() Kind { return KindRenewalAnswer }
func (Join) Kind() Kind          { return KindJoin }
func (Leave) Kind() Kind         { return KindLeave }
func (Acquire) Kind() Kind       { return KindAcquire }
func (Grant) Kind() Kind         { return KindGrant }
func (Wait) Kind() Kind          { return KindWait }
func (NotHome) Kind() Kind       { return KindNotHome }
func (Refused) Kind() Kind       { return KindRefused }
func (Recall) Kind() Kind        { return KindRecall }
func (Release) Kind() Kind       { return KindRelease }
func (Renew) Kind() Kind         { return KindRenew }
func (RenewReply) Kind() Kind    { return KindRenewReply }
func (Withdraw) Kind() Kind      { return KindWithdraw }
func (Reclaim) Kind() Kind       { return KindReclaim }
func (ReclaimAnswer) Kind() Kind { return KindReclaimAnswer }
func (DrainQuery) Kind() Kind    { return KindDrainQuery }
func (Drained) Kind() Kind       { return KindDrained }
func (GateRemaining) Kind() Kind { return KindGateRemaining }
