package home

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/dtoken"
	"github.com/homelock/homelock/internal/intern"
	"github.com/homelock/homelock/msg"
)

// entry is the home's state for one key, kept only while needed: a live
// delegation, waiters, a gate or drain in progress, or a barrier to hand on.
//
// A home may keep a million entries for idle delegations, so an entry is
// what one needs (80 bytes, TestEntrySize); the byte strings and whatever
// only a contended, moving or freshly freed key needs are behind pointers,
// nil while all of it is, and what many delegations share is in their mint.
// Readers go through accessors that read a missing part as zero, so dropping
// it changes nothing.
type entry struct {
	key string
	// D1: at most one live delegation per key (d.holder non-zero).
	d     delegation
	bytes *entryBytes
	x     *entryExtra
	// The live delegation's token is its mint's, with the counter's low 32
	// bits here (see Machine.dtok).
	counter uint32
	mint    intern.ID
	// pos is the key's place in Machine.timers.
	pos   uint32
	flags delegFlags // the live delegation's, here to fill the entry's padding
}

// mint is what the tokens one incarnation grants (or adopts) in one epoch
// have in common: all but the low 32 bits of the counter.
type mint struct {
	epoch, inc uint64
	counterHi  uint32
}

// dtok is ke's live delegation's token (zero when none is live).
func (m *Machine) dtok(ke *entry) dtoken.T {
	t := m.mints.Get(ke.mint)
	if t == nil {
		return dtoken.T{}
	}
	return dtoken.T{Epoch: t.epoch, Incarnation: t.inc, Counter: uint64(t.counterHi)<<32 | uint64(ke.counter)}
}

// delegation is a live delegation as the home sees it. Its expiry runs on the
// home's own, longer clock: anchored at the grant (or renewal receipt) and
// lengthened by Skew, so the holder always expires first.
type delegation struct {
	// reqSeq is the granted request's sequence number; the request's
	// incarnation is the holder's (see Machine.req).
	reqSeq  uint64
	expires deadline.Instant
	lease   time.Duration
	// holder is the holding member as the incarnation that asked for it (or
	// answered the reclaim that adopted it).
	holder  intern.ID
	attempt uint32 // the attempt the Grant echoed; a re-sent Grant echoes it again (H6)
}

type delegFlags uint8

const (
	recalled  delegFlags = 1 << iota // a Recall was sent (or a contended grant said as much)
	contended                        // granted while others waited
	// oddReq: the granted request did not number itself with the
	// incarnation that sent it; entryExtra.oddReq keeps it whole.
	oddReq
)

func (ke *entry) is(f delegFlags) bool { return ke.flags&f != 0 }

func (ke *entry) set(f delegFlags, on bool) {
	if on {
		ke.flags |= f
	} else {
		ke.flags &^= f
	}
}

// deleg is key's live delegation, nil when there is none. The pointer is
// into the entry: it is good while the delegation is.
func (ke *entry) deleg() *delegation {
	if ke.d.holder == 0 {
		return nil
	}
	return &ke.d
}

// holder is the member holding key's live delegation, as the incarnation
// that asked for it; nil when none is live.
func (m *Machine) holder(ke *entry) *peer { return m.peers.Get(ke.d.holder) }

// peer is a holder as one of its incarnations: a million delegations name a
// handful, so each keeps the four-byte ID of a shared one (Machine.peers)
// instead of its own copy of the member and incarnation.
type peer struct {
	msg.Member
	Inc uint64
}

// req is the request key's live delegation answered: zero for an adopted
// one. A requester numbers its requests with its incarnation, the one that
// sent them, so the entry keeps only the sequence number in the common case.
func (m *Machine) req(ke *entry) msg.RequestID {
	switch {
	case ke.is(oddReq):
		return ke.x.oddReq
	case ke.d.reqSeq == 0:
		return msg.RequestID{}
	}
	return msg.RequestID{Inc: m.holder(ke).Inc, Seq: ke.d.reqSeq}
}

// setReq records r as the request key's live delegation answers (after its
// holder is set).
func (m *Machine) setReq(ke *entry, r msg.RequestID) {
	ke.d.reqSeq = r.Seq
	odd := r != msg.RequestID{} && (r.Seq == 0 || r.Inc != m.holder(ke).Inc)
	ke.set(oddReq, odd)
	if odd {
		ke.edit().oddReq = r
	} else if ke.x != nil {
		ke.x.oddReq = msg.RequestID{}
	}
}

// entryBytes are the byte strings an entry keeps, nil when all three are.
// nil and empty are kept apart, as the messages keep them.
type entryBytes struct {
	// barrier is the newest released (or drained-in) barrier, handed to the
	// next grant (successor freshness).
	barrier []byte
	// given is the live delegation's inherited barrier, given with its grant.
	given  []byte
	signed []byte // the live delegation's signed grant
}

func (ke *entry) barrier() []byte {
	if ke.bytes == nil {
		return nil
	}
	return ke.bytes.barrier
}

func (ke *entry) given() []byte {
	if ke.bytes == nil {
		return nil
	}
	return ke.bytes.given
}

func (ke *entry) signed() []byte {
	if ke.bytes == nil {
		return nil
	}
	return ke.bytes.signed
}

// setBytes replaces the three byte strings.
func (ke *entry) setBytes(barrier, given, signed []byte) {
	if barrier == nil && given == nil && signed == nil {
		ke.bytes = nil
		return
	}
	if ke.bytes == nil {
		ke.bytes = new(entryBytes)
	}
	*ke.bytes = entryBytes{barrier: barrier, given: given, signed: signed}
}

// entryExtra is the part of an entry that an idle delegation does not need.
type entryExtra struct {
	waiters []*waiter
	// queries are DrainQueries from K's new home that we still owe an answer.
	queries []pendingQuery
	// drainedFor is the epoch whose move-in gate term a valid Drained waived.
	drainedFor uint64
	// lastQuery is when this node (as gated new home) last sent a DrainQuery.
	lastQuery time.Time
	queryAt   time.Time // do not re-query before (GateRemaining)
	// idleSince is when the last delegation ended; read only while none is
	// live (how long to keep the barrier).
	idleSince time.Time
	// waitedSince is when the live delegation's request joined the queue,
	// kept while requests queue behind it: checkers compare the two (FIFO),
	// which can only be broken while others wait.
	waitedSince time.Time
	oddReq      msg.RequestID // see Machine.req
}

func (x *entryExtra) empty() bool {
	return x.waiters == nil && x.queries == nil && x.drainedFor == 0 && x.lastQuery.IsZero() &&
		x.queryAt.IsZero() && x.idleSince.IsZero() && x.waitedSince.IsZero() && x.oddReq == msg.RequestID{}
}

// noExtra is what a missing entryExtra reads as.
var noExtra entryExtra

// more returns ke's extra state for reading; all zero when it has none.
func (ke *entry) more() *entryExtra {
	if ke.x == nil {
		return &noExtra
	}
	return ke.x
}

// edit returns ke's extra state for writing, making it if need be.
func (ke *entry) edit() *entryExtra {
	if ke.x == nil {
		ke.x = new(entryExtra)
	}
	return ke.x
}

// trim drops the extra state once none of it is needed.
func (ke *entry) trim() {
	if ke.x == nil {
		return
	}
	if len(ke.x.waiters) == 0 {
		ke.x.waitedSince = time.Time{}
	}
	if ke.x.empty() {
		ke.x = nil
	}
}

func (ke *entry) waiters() []*waiter { return ke.more().waiters }

type waiter struct {
	since     time.Time // when it joined the queue: FIFO order
	from      msg.Member
	fromInc   uint64
	req       msg.RequestID
	attempt   uint32
	lease     time.Duration
	lastHeard time.Time
	told      msg.WaitReason // the reason last sent in a Wait
}

// waitEvery: a waiter hears Wait again on every waitEvery-th attempt.
const waitEvery = 8

type pendingQuery struct {
	from     msg.NodeID
	q        msg.DrainQuery
	answered time.Time
}

// removeWaiter drops waiter i, letting go of it (a queue that empties keeps
// no backing array, which would otherwise pin the last waiter of every key).
func (m *Machine) removeWaiter(ke *entry, i int) {
	m.waiting--
	x := ke.x
	n := copy(x.waiters[i:], x.waiters[i+1:])
	x.waiters[i+n] = nil
	x.waiters = x.waiters[:i+n]
	if len(x.waiters) == 0 {
		x.waiters = nil
	}
}

// idleKeep is how long a free entry keeps its barrier for a later holder.
func (m *Machine) idleKeep() time.Duration { return 10 * m.cfg.MaxLease }

func (m *Machine) entry(key string) *entry {
	ke := m.keys.Get(key)
	if ke == nil {
		ke = &entry{key: key}
		m.keys.Put(ke)
	}
	return ke
}

// free ends key's delegation. released says the holder gave it back (with
// barrier, nil meaning "keep the inherited one", H18).
func (m *Machine) free(now time.Time, ke *entry, released bool, barrier []byte) {
	d := ke.deleg()
	if d == nil {
		return
	}
	handOn := ke.barrier()
	if barrier != nil {
		handOn = barrier
	} else if g := ke.given(); g != nil {
		handOn = g
	}
	if released {
		m.stats.Releases++
		if len(ke.waiters()) > 0 {
			m.stats.Handoffs++
		}
	} else {
		m.stats.ExpiredHolds++
	}
	holder := m.holder(ke).ID
	m.setDeleg(ke, delegation{}, dtoken.T{}, msg.RequestID{}, nil, nil)
	ke.setBytes(handOn, nil, nil)
	ke.edit().idleSince = now
	m.live--
	if m.byHold[holder]--; m.byHold[holder] <= 0 {
		delete(m.byHold, holder)
	}
}

// setDeleg replaces key's live delegation with d (no holder: none), of token
// tok, which answered request req and was given with barrier given and
// signed grant signed; the barrier to hand on stays. It is neither recalled
// nor contended yet.
func (m *Machine) setDeleg(ke *entry, d delegation, tok dtoken.T, req msg.RequestID, given, signed []byte) {
	old := ke.d.holder
	ke.d = d
	m.peers.Unref(old)
	if tok.IsZero() {
		m.mints.Unref(ke.mint)
		ke.mint, ke.counter = 0, 0
	} else {
		ke.mint = m.mints.Swap(ke.mint, mint{epoch: tok.Epoch, inc: tok.Incarnation, counterHi: uint32(tok.Counter >> 32)})
		ke.counter = uint32(tok.Counter)
	}
	ke.flags = 0
	m.setReq(ke, req)
	ke.setBytes(ke.barrier(), given, signed)
}

// gc forgets an entry that carries nothing anymore.
func (m *Machine) gc(now time.Time, key string, ke *entry) {
	x := ke.more()
	if ke.deleg() != nil || len(x.waiters) > 0 || len(x.queries) > 0 {
		return
	}
	if ke.barrier() != nil && now.Sub(x.idleSince) < m.idleKeep() {
		m.schedule(ke, x.idleSince.Add(m.idleKeep()))
		return
	}
	if x.drainedFor != 0 {
		if cur := m.current(); cur != nil && cur.e.Number == x.drainedFor && m.IsHome(key) {
			// The waiver must outlive an idle period: the key has no entry to
			// recompute it from otherwise. It is tiny; keep it for the epoch.
			return
		}
	}
	m.keys.Delete(key)
	delete(m.needLiveness, key)
	m.timers.Remove(ke)
}
