package home

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/dtoken"
	"github.com/homelock/homelock/internal/intern"
	"github.com/homelock/homelock/msg"
)

// entry is the home's state for one key, kept only while needed: a live
// delegation, waiters, a gate or drain in progress, or a barrier to hand on.
//
// A home may keep a million entries for idle delegations, so an entry is
// what one needs (64 bytes, TestEntrySize); the byte strings, a lease other
// than MaxLease, and one pointer further whatever only a contended, moving
// or freshly freed key needs are behind ext, nil while all of it is, and
// what many delegations share is in their mint. Readers go through
// accessors that read a missing part as zero (the lease as MaxLease), so
// dropping it changes nothing.
type entry struct {
	key string
	// D1: at most one live delegation per key (d.holder non-zero).
	d   delegation
	ext *entryExt
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
	// oddLease: the live delegation's lease is not MaxLease (a requester
	// asked for less, the home's liveness was short, or a reclaim adopted
	// it with what it had left); entryExt.lease keeps it.
	oddLease
	// signedGrant: the live delegation's Grant carried a signed grant
	// (Config.Sign). The home keeps none of it: a re-sent Grant is signed
	// again from what the entry keeps (Machine.sign).
	signedGrant
	// handedOver: the key moved away and its new home took this delegation
	// over (Drained.Live); its end here is no expired hold.
	handedOver
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
		return ke.ext.x.oddReq
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
	} else if x := ke.extra(); x != nil {
		x.oddReq = msg.RequestID{}
	}
}

// lease is the live delegation's lease as last granted or renewed.
func (m *Machine) lease(ke *entry) time.Duration {
	if ke.is(oddLease) {
		return ke.ext.lease
	}
	return m.cfg.MaxLease
}

// setLease records the live delegation's lease: a million delegations
// asked for by requesters configured like this home all have MaxLease,
// which costs them nothing.
func (m *Machine) setLease(ke *entry, l time.Duration) {
	odd := l != m.cfg.MaxLease
	ke.set(oddLease, odd)
	if odd {
		ke.editExt().lease = l
	} else if ke.ext != nil {
		ke.ext.lease = 0
		ke.trim()
	}
}

// entryExt is what an idle delegation's entry needs only sometimes, nil
// while all of it is zero: its byte strings (nil and empty kept apart, as
// the messages keep them), a lease other than MaxLease, and one pointer
// further what only a contended, moving or freshly freed key needs. With
// barriers an entry pays sixteen bytes more for this than for a part with
// just the bytes; every other idle delegation eight bytes less. A signed
// grant is not kept (signedGrant).
type entryExt struct {
	// barrier is the newest released (or drained-in) barrier, handed to the
	// next grant (successor freshness).
	barrier []byte
	// given is the live delegation's inherited barrier, given with its grant.
	given []byte
	lease time.Duration // the live delegation's, with oddLease
	x     *entryExtra
}

func (e *entryExt) empty() bool {
	return e.barrier == nil && e.given == nil && e.lease == 0 && e.x == nil
}

// editExt returns ke's ext for writing, making it if need be.
func (ke *entry) editExt() *entryExt {
	if ke.ext == nil {
		ke.ext = new(entryExt)
	}
	return ke.ext
}

func (ke *entry) barrier() []byte {
	if ke.ext == nil {
		return nil
	}
	return ke.ext.barrier
}

func (ke *entry) given() []byte {
	if ke.ext == nil {
		return nil
	}
	return ke.ext.given
}

// setBytes replaces the two byte strings.
func (ke *entry) setBytes(barrier, given []byte) {
	if barrier != nil || given != nil {
		ke.editExt()
	}
	if e := ke.ext; e != nil {
		e.barrier, e.given = barrier, given
		ke.trim()
	}
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
	if x := ke.extra(); x != nil {
		return x
	}
	return &noExtra
}

// extra is ke's extra state, nil when it has none.
func (ke *entry) extra() *entryExtra {
	if ke.ext == nil {
		return nil
	}
	return ke.ext.x
}

// edit returns ke's extra state for writing, making it if need be.
func (ke *entry) edit() *entryExtra {
	e := ke.editExt()
	if e.x == nil {
		e.x = new(entryExtra)
	}
	return e.x
}

// trim drops the extra state once none of it is needed.
func (ke *entry) trim() {
	e := ke.ext
	if e == nil {
		return
	}
	if x := e.x; x != nil {
		if len(x.waiters) == 0 {
			x.waitedSince = time.Time{}
		}
		if x.empty() {
			e.x = nil
		}
	}
	if e.empty() && !ke.is(oddLease) { // an odd lease may be zero
		ke.ext = nil
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
	x := ke.extra()
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
	handOn := ke.handOn(barrier)
	if released {
		m.stats.Releases++
		if len(ke.waiters()) > 0 {
			m.stats.Handoffs++
		}
	} else if !ke.is(handedOver) {
		m.stats.ExpiredHolds++
	}
	m.unhold(m.holder(ke).ID)
	// No delegation, so no lease to keep: MaxLease is the one that costs
	// the entry nothing (the lease is read only while one is live).
	m.setDeleg(ke, delegation{}, m.cfg.MaxLease, dtoken.T{}, msg.RequestID{}, nil)
	ke.setBytes(handOn, nil)
	ke.edit().idleSince = now
}

// unhold counts one live delegation of holder less.
func (m *Machine) unhold(holder msg.NodeID) {
	m.live--
	if m.byHold[holder]--; m.byHold[holder] <= 0 {
		delete(m.byHold, holder)
	}
}

// adopt makes a delegation this home did not grant here key's live one, in
// place of any record it kept: one a holder reported to a reclaim, or one a
// moved key's old home handed over. It answers no request (the home never
// sends a Grant for it) and runs out at expires, on this home's clock.
func (m *Machine) adopt(ke *entry, holder peer, tok fence.Token, lease time.Duration, expires deadline.Instant, given []byte) {
	if ke.deleg() != nil {
		m.unhold(m.holder(ke).ID)
	}
	m.setDeleg(ke, delegation{holder: m.peers.Ref(holder), expires: expires}, lease, dtoken.Of(tok), msg.RequestID{}, given)
	if x := ke.extra(); x != nil {
		x.idleSince, x.waitedSince = time.Time{}, time.Time{}
	}
	m.live++
	m.byHold[holder.ID]++
	m.timers.Add(ke, expires)
}

// handOn is the barrier the next grant gets once the live delegation ends
// with barrier (nil: none of its own, it passes on what it inherited, H18).
func (ke *entry) handOn(barrier []byte) []byte {
	if barrier != nil {
		return barrier
	}
	if g := ke.given(); g != nil {
		return g
	}
	return ke.barrier()
}

// setDeleg replaces key's live delegation with d (no holder: none), of token
// tok, which answered request req and was given with barrier given; the
// barrier to hand on stays. It is neither recalled, contended nor signed
// yet.
func (m *Machine) setDeleg(ke *entry, d delegation, lease time.Duration, tok dtoken.T, req msg.RequestID, given []byte) {
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
	m.setLease(ke, lease)
	ke.setBytes(ke.barrier(), given)
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
	if x.drainedFor != 0 && m.IsHome(key) {
		// The waiver must outlive an idle period: the key has no entry to
		// recompute it from otherwise. It is tiny; keep it until the gate
		// term it waived would have passed anyway.
		if _, v := m.view(x.drainedFor); v != nil {
			if end := v.learnedAt.Add(m.cfg.EpochLease + m.cfg.Skew); now.Before(end) {
				m.schedule(ke, end)
				return
			}
		}
	}
	m.keys.Delete(key)
	delete(m.needLiveness, key)
	m.timers.Remove(ke)
}
