package delegation

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/dtoken"
	"github.com/homelock/homelock/internal/intern"
	"github.com/homelock/homelock/msg"
)

// phase of one key at this holder.
type phase uint8

const (
	idle      phase = iota // no delegation, no request
	requested              // an Acquire is outstanding
	held                   // a delegation is held (maybe recalled, maybe settling)
)

// keyState is one key at this holder. A node may hold a million idle
// delegations, so the state is kept to what an idle one needs (64 bytes,
// TestKeyStateSize); the rest is behind ext, whose parts are dropped again
// once all zero: what the grant carried and a lease other than the one this
// node asks for, and one pointer further what only a released or moving key
// needs (the last release; a request, queued lockers, a renewal in flight).
// Readers go through the accessors below, which read a missing part as all
// zero (the lease as Config.Lease), so dropping it changes nothing.
type keyState struct {
	key string
	// The delegation (phase held), named without a section: its critical
	// sections are numbered by sections. Its token is the counter here and
	// the epoch and incarnation of its origin (see Machine.dtok).
	counter uint64
	expires deadline.Instant // on this holder's clock, shortened by drift
	ext     *keyExt

	// origin is the rest of the token and the home that granted the
	// delegation, shared with the delegations granted alongside (zero when
	// none is held).
	origin intern.ID
	pos    uint32 // place in Machine.timers
	// renews counts the delegation's renewal attempts; it never restarts
	// within one delegation, idle periods included, so a delayed reply is
	// never taken for a later attempt's.
	renews uint32
	// active is the admitted critical section: index+1 in Machine.handles,
	// 0 for none.
	active uint32
	// sections counts the critical sections admitted under the delegation:
	// the last one's token has Section = sections (F1 within a delegation).
	sections uint32
	phase    phase
	// left is how many more critical sections may start (-1: unlimited); a
	// contended grant allows one, a recall none.
	left       int8
	flags      keyFlags
	waitReason msg.WaitReason // why the last request waited, for failures' details
}

type keyFlags uint8

const (
	fresh    keyFlags = 1 << iota // the store's wait hook returned for the inherited barrier
	freshAsk                      // the wait hook was asked and has not answered
	settling                      // the barrier hook runs; Release follows its answer
	admitted                      // a critical section was admitted under this delegation
	// targetIsIssuer: the request's target was the home that granted it, so
	// x keeps no copy of it while the delegation is held (see targetID).
	targetIsIssuer
	// refused: the home refused a renewal (the key moved, or this node left
	// the epoch); it will not extend the delegation, so nothing asks again.
	refused
	// handedOn: the delegation just went back to waiters (it was contended
	// or recalled); a request made in the same step knows it queues behind
	// them (msg.Acquire.Queued). Cleared at the end of that step.
	handedOn
	// oddLease: the delegation's lease is not Config.Lease (a home with a
	// smaller MaxLease, or little liveness left, granted less); ext keeps it.
	oddLease
)

// origin is what the delegations one home incarnation grants (or adopts)
// in one epoch have in common: a million idle delegations name a handful, so
// each keeps an intern.ID of a shared one, not 40 bytes of its own.
type origin struct {
	epoch, inc uint64 // the token's
	issuer     issuer
	// takenOver: the issuer is not the home that minted the token but the
	// key's new home, which took the delegation over when the key moved.
	takenOver bool
}

// issuer is the home that granted a delegation, as the incarnation that
// issued or (by reclaim) adopted it.
type issuer struct {
	msg.Member
	Inc uint64
}

// dtok is ks's delegation (zero when none is held).
func (m *Machine) dtok(ks *keyState) dtoken.T {
	o := m.origins.Get(ks.origin)
	if o == nil {
		return dtoken.T{}
	}
	return dtoken.T{Epoch: o.epoch, Incarnation: o.inc, Counter: ks.counter}
}

// tok is the delegation's own token, as messages and hooks carry it.
func (m *Machine) tok(ks *keyState) fence.Token { return m.dtok(ks).Token() }

func (ks *keyState) is(f keyFlags) bool { return ks.flags&f != 0 }

func (ks *keyState) set(f keyFlags, on bool) {
	if on {
		ks.flags |= f
	} else {
		ks.flags &^= f
	}
}

// keyExt is what an idle delegation needs only sometimes, nil while all of
// it is zero. The byte strings a Grant carried are shared with the message
// and never changed: the barrier to inherit and the signed grant handed to
// every admitted locker (nil and empty are kept apart, as the messages keep
// them); they cost a deployment with barriers or a key ring sixteen bytes
// more than a part of their own would, and every other idle delegation
// eight bytes less.
type keyExt struct {
	inherited []byte
	signed    []byte
	lease     time.Duration // the delegation's lease, with oddLease
	x         *keyExtra
}

func (e *keyExt) empty() bool {
	return e.inherited == nil && e.signed == nil && e.lease == 0 && e.x == nil
}

// editExt returns ks's ext for writing, making it if need be.
func (ks *keyState) editExt() *keyExt {
	if ks.ext == nil {
		ks.ext = new(keyExt)
	}
	return ks.ext
}

func (ks *keyState) inherited() []byte {
	if ks.ext == nil {
		return nil
	}
	return ks.ext.inherited
}

func (ks *keyState) signed() []byte {
	if ks.ext == nil {
		return nil
	}
	return ks.ext.signed
}

// setGrantBytes records what the delegation's Grant carried (nil, nil for a
// delegation that is gone).
func (ks *keyState) setGrantBytes(inherited, signed []byte) {
	if inherited != nil || signed != nil {
		ks.editExt()
	}
	if ks.ext != nil {
		ks.ext.inherited, ks.ext.signed = inherited, signed
		ks.trim()
	}
}

// lease is the held delegation's lease as last granted or renewed (read
// only while one is held).
func (m *Machine) lease(ks *keyState) time.Duration {
	if ks.is(oddLease) {
		return ks.ext.lease
	}
	return m.cfg.Lease
}

// setLease records the held delegation's lease; a million delegations from
// homes configured alike all have Config.Lease, which costs them nothing.
func (m *Machine) setLease(ks *keyState, l time.Duration) {
	odd := l != m.cfg.Lease
	ks.set(oddLease, odd)
	if odd {
		ks.editExt().lease = l
	} else if ks.ext != nil {
		ks.ext.lease = 0
		ks.trim()
	}
}

// keyExtra is the part of a key's state that an idle delegation does not
// need, in two parts dropped separately once all zero: the last release,
// which outlives the delegation (a key that changed hands idles with just
// this), and behind one more pointer what only a key in motion needs.
type keyExtra struct {
	last   lastRelease
	motion *keyMotion
}

// lastRelease is the last token released, to answer a repeated Recall with
// the same Release.
type lastRelease struct {
	token   fence.Token
	barrier []byte
	at      deadline.Instant
	sent    bool
}

func (l *lastRelease) empty() bool {
	return l.token == fence.Token{} && l.barrier == nil && l.at.IsZero() && !l.sent
}

// keyMotion is what only a key in motion needs: a request, a renewal in
// flight, queued lockers.
type keyMotion struct {
	// The outstanding request (phase requested). target, detail and the
	// key state's waitReason outlive it: they explain later failures.
	req         msg.RequestID
	target      msg.Member
	attemptN    uint32 // the request's last attempt
	attempts    attemptLog
	nextSend    time.Time
	detail      string
	earlyRecall fence.Token // a Recall that overtook its Grant (H6)

	// A renewal outstanding: when its attempts were sent, when to resend.
	renewals attemptLog
	renewAt  time.Time

	// Local lockers queued (FIFO) behind the admitted one.
	queue []localWaiter
}

func (x *keyMotion) empty() bool {
	return x.req == msg.RequestID{} && x.target == msg.Member{} && x.attemptN == 0 && x.attempts.times == nil &&
		x.nextSend.IsZero() && x.detail == "" && x.earlyRecall == fence.Token{} &&
		x.renewals.times == nil && x.renewAt.IsZero() && x.queue == nil
}

// What missing parts read as.
var (
	noLast   lastRelease
	noMotion keyMotion
)

// more returns ks's key-in-motion state for reading; all zero when it has
// none.
func (ks *keyState) more() *keyMotion {
	if x := ks.extra(); x != nil && x.motion != nil {
		return x.motion
	}
	return &noMotion
}

// extra is ks's released-or-moving state, nil when it has none.
func (ks *keyState) extra() *keyExtra {
	if ks.ext == nil {
		return nil
	}
	return ks.ext.x
}

// editExtra returns ks's released-or-moving state for writing, making it if
// need be.
func (ks *keyState) editExtra() *keyExtra {
	e := ks.editExt()
	if e.x == nil {
		e.x = new(keyExtra)
	}
	return e.x
}

// edit returns ks's key-in-motion state for writing, making it if need be.
func (ks *keyState) edit() *keyMotion {
	x := ks.editExtra()
	if x.motion == nil {
		x.motion = new(keyMotion)
	}
	return x.motion
}

// last returns ks's last release for reading; all zero when it has none.
func (ks *keyState) last() *lastRelease {
	if x := ks.extra(); x != nil {
		return &x.last
	}
	return &noLast
}

// setLast records the last release.
func (ks *keyState) setLast(l lastRelease) { ks.editExtra().last = l }

// trim drops the parts of the extra state that are no longer needed.
func (ks *keyState) trim() {
	if ks.ext == nil {
		return
	}
	if x := ks.ext.x; x != nil {
		if x.motion != nil && x.motion.empty() {
			x.motion = nil
		}
		if x.motion == nil && x.last.empty() {
			ks.ext.x = nil
		}
	}
	if ks.ext.empty() && !ks.is(oddLease) { // an odd lease may be zero
		ks.ext = nil
	}
}

func (ks *keyState) queue() []localWaiter { return ks.more().queue }

// setPhase moves ks to phase p; the machine's Held and Pending gauges follow,
// so that Stats counts no keys.
func (m *Machine) setPhase(ks *keyState, p phase) {
	m.gauges.phases[ks.phase]--
	m.gauges.phases[p]++
	ks.phase = p
}

// setQueue replaces the queue; an empty one keeps no backing array. The
// machine's Deferred gauge follows.
func (m *Machine) setQueue(ks *keyState, q []localWaiter) {
	m.gauges.deferred += len(q) - len(ks.queue())
	if len(q) == 0 {
		q = nil
		if x := ks.extra(); x == nil || x.motion == nil {
			return
		}
	}
	ks.edit().queue = q
}

// targetID is the node the last request went to (its home then), for
// failures' details.
func (m *Machine) targetID(ks *keyState) msg.NodeID {
	if ks.is(targetIsIssuer) {
		return m.issuer(ks).ID
	}
	return ks.more().target.ID
}

// handle is an admitted critical section. Handles live in shard.handles,
// not in the key state: at most a few keys have one at a time, while every
// held key would pay for the room.
type handle struct {
	locker uint64
	// leaseEnd is the critical section's own lease; zero to follow the
	// delegation (a renewal extends it too).
	leaseEnd deadline.Instant
}

type localWaiter struct {
	locker   uint64
	deadline time.Time
	lease    time.Duration
	// since is when it queued; silentFor, when set, is how long it waits
	// for a home that answers nothing before it gives way (giveWayAt).
	since     time.Time
	silentFor time.Duration
}

// handle returns ks's admitted critical section, nil if none; ks is in s.
// The pointer is good until the next admission on any key of s.
func (s *shard) handle(ks *keyState) *handle {
	if ks.active == 0 {
		return nil
	}
	return &s.handles[ks.active-1]
}

// handleOf is handle for a key state whose shard the caller has not at hand.
func (m *Machine) handleOf(ks *keyState) *handle {
	if ks.active == 0 {
		return nil
	}
	return m.shardOf(ks.key).handle(ks)
}

// setActive admits h on ks, which is in s.
func (s *shard) setActive(ks *keyState, h handle) {
	if ks.active == 0 {
		if n := len(s.freeHandles); n > 0 {
			ks.active = s.freeHandles[n-1]
			s.freeHandles = s.freeHandles[:n-1]
		} else {
			s.handles = append(s.handles, handle{})
			ks.active = uint32(len(s.handles))
		}
	}
	s.handles[ks.active-1] = h
}

// endActive ends ks's admitted critical section, if any; ks is in s.
func (s *shard) endActive(ks *keyState) {
	if ks.active == 0 {
		return
	}
	s.handles[ks.active-1] = handle{}
	s.freeHandles = append(s.freeHandles, ks.active)
	ks.active = 0
}

// issuer is the home that issued (or adopted) ks's delegation; nil when
// none is held.
func (m *Machine) issuer(ks *keyState) *issuer {
	if o := m.origins.Get(ks.origin); o != nil {
		return &o.issuer
	}
	return nil
}

// setOrigin records the token (all but its counter, kept in ks) and the
// home, as incarnation inc, that issued or adopted ks's delegation.
func (m *Machine) setOrigin(ks *keyState, tok fence.Token, from msg.Member, inc uint64) {
	ks.origin = m.origins.Swap(ks.origin, origin{epoch: tok.Epoch, inc: tok.Incarnation, issuer: issuer{from, inc}})
}

// setIssuer records the home, as incarnation inc, that now renews and frees
// ks's delegation: one that adopted it by reclaim, or (takenOver) a moved
// key's new home that took it over; once taken over, always taken over.
func (m *Machine) setIssuer(ks *keyState, from msg.Member, inc uint64, takenOver bool) {
	o := *m.origins.Get(ks.origin)
	o.issuer = issuer{from, inc}
	o.takenOver = o.takenOver || takenOver
	ks.origin = m.origins.Swap(ks.origin, o)
}

// homeNow is the key's home in the newest epoch this node knows when that is
// not the issuer: the home to renew with, and to tell of the release too,
// once a key has moved (docs/design.md, "Moving a running section").
func (m *Machine) homeNow(ks *keyState) (msg.Member, bool) {
	if m.ring == nil {
		return msg.Member{}, false
	}
	h, ok := m.ring.Home(ks.key)
	if !ok || h.ID == m.issuer(ks).ID {
		return msg.Member{}, false
	}
	return h, true
}
