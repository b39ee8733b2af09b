package delegation

import (
	"math"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
)

// TryAdmit is the fast path: if this node holds key's delegation, nobody is
// admitted or queued, and the lease has room, it admits locker at once with
// zero messages and no allocation.
//
// It reads and writes nothing outside key's shard but the machine's
// configuration and the origins of held delegations, which only other calls
// change (Config.Shards).
func (m *Machine) TryAdmit(now time.Time, key string, locker uint64, lease time.Duration) (Event, bool) {
	var a Admission
	if !m.TryAdmitAt(ShardOf(key, len(m.shards)), deadline.At(now), key, locker, lease, &a) {
		return Event{}, false
	}
	return a.event(key, locker), true
}

// Admission is what the fast path tells its driver of the section it
// admitted: the Admitted event's fields that the driver does not already
// know, with the end as an Instant, so that the repeat lock builds no whole
// Event and converts no time back (docs/design.md, "The repeat path across
// cores", has what that saved).
type Admission struct {
	Slot    uint32
	Token   fence.Token
	Expires deadline.Instant
	Signed  []byte
}

func (a *Admission) event(key string, locker uint64) Event {
	return Event{Kind: Admitted, Slot: a.Slot, Key: key, Locker: locker, Token: a.Token, Expires: a.Expires.Time(), Signed: a.Signed}
}

// TryAdmitAt is TryAdmit for a driver that has key's shard i at hand and
// reads its clock as an Instant.
func (m *Machine) TryAdmitAt(i int, now deadline.Instant, key string, locker uint64, lease time.Duration, a *Admission) bool {
	s := &m.shards[i]
	ks := s.keys.Get(key)
	if ks == nil || ks.active != 0 || len(ks.queue()) > 0 || !m.canAdmit(now, ks) {
		return false
	}
	s.localFast++
	m.admit(now, s, ks, locker, lease, a)
	return true
}

// Lock queues locker for key until deadline; an Admitted or Failed event
// answers it. lease bounds its critical section (0: the delegation's). With
// silentFor, it fails as unavailable once the key's home has answered
// nothing for that long (giveWayAt), so that a client can ask the lock of
// another node, one that may reach the home.
func (m *Machine) Lock(now time.Time, key string, locker uint64, deadline time.Time, lease, silentFor time.Duration) {
	if m.mixed != "" {
		m.event(Event{Kind: Failed, Key: key, Locker: locker, Reason: ReasonUnavailable, Detail: m.mixed})
		return
	}
	if ev, ok := m.TryAdmit(now, key, locker, lease); ok {
		m.event(ev)
		return
	}
	s := m.shardOf(key)
	ks := s.keys.Get(key)
	if ks == nil {
		ks = &keyState{key: key, left: -1}
		s.keys.Put(ks)
	}
	x := ks.edit()
	x.queue = append(x.queue, localWaiter{locker: locker, deadline: deadline, lease: lease, since: now, silentFor: silentFor})
	m.gauges.deferred++
	m.service(now, key, ks)
}

// Unlock ends locker's critical section (a no-op if it is not admitted). It
// reports whether the fast path sufficed (nothing else to do).
func (m *Machine) Unlock(now time.Time, key string, locker uint64) bool {
	s := m.shardOf(key)
	ks := s.keys.Get(key)
	if ks == nil || ks.active == 0 || s.handle(ks).locker != locker {
		return true
	}
	s.endActive(ks)
	if len(ks.queue()) == 0 && ks.left != 0 {
		return true
	}
	m.service(now, key, ks)
	return false
}

// TryUnlockIn is Unlock's fast path for key, in shard i (ShardOf), which
// needs no clock: it ends locker's critical section and reports true when
// nothing else is left to do (no local locker waits and the delegation is
// not draining). Otherwise it changes nothing and the caller uses Unlock
// with the current time. Like TryAdmit, it touches only key's shard.
func (m *Machine) TryUnlockIn(i int, key string, locker uint64) bool {
	s := &m.shards[i]
	ks := s.keys.Get(key)
	if ks == nil || ks.active == 0 || s.handle(ks).locker != locker {
		return true
	}
	if len(ks.queue()) > 0 || ks.left == 0 {
		return false
	}
	s.endActive(ks)
	return true
}

// Cancel withdraws a queued locker (its context ended); no event follows.
func (m *Machine) Cancel(now time.Time, key string, locker uint64) {
	ks := m.get(key)
	if ks == nil {
		return
	}
	for i, w := range ks.queue() {
		if w.locker == locker {
			q := ks.queue()
			m.setQueue(ks, append(q[:i], q[i+1:]...))
			m.service(now, key, ks)
			return
		}
	}
	if ks.active != 0 && m.handleOf(ks).locker == locker {
		m.Unlock(now, key, locker)
	}
}

// canAdmit: a delegation, fresh, not draining, with more than MinUseful left.
// A holder whose renewal is outstanding near expiry is in OWNERSHIP_UNKNOWN
// and admits nothing.
func (m *Machine) canAdmit(now deadline.Instant, ks *keyState) bool {
	return ks.phase == held && ks.is(fresh) && !ks.is(settling) && ks.left != 0 && m.mixed == "" &&
		ks.expires.Sub(now) > m.cfg.MinUseful
}

// admit is on the fast path: its arithmetic is on Instants, converted once.
func (m *Machine) admit(at deadline.Instant, s *shard, ks *keyState, locker uint64, lease time.Duration, a *Admission) {
	end := ks.expires
	// Without its own lease a critical section follows the delegation, so a
	// renewal extends it too (leaseEnd zero).
	// The handle's slot is reused: the fast path allocates nothing.
	h := handle{locker: locker}
	if lease > 0 {
		h.leaseEnd = at.Add(lease)
		end = min(end, h.leaseEnd)
	}
	s.setActive(ks, h)
	ks.set(admitted, true)
	if ks.left > 0 {
		ks.left--
	}
	// Every section gets a token of its own, above the last one's, with no
	// message; the delegation drains before its count could wrap.
	if ks.sections++; ks.sections == math.MaxUint32 {
		ks.left = 0
	}
	s.admissions++
	// The section is served at its end or at half the delegation's lease,
	// whichever comes first: it renews from then on. An idle delegation's
	// wake-up is its lapse release, too late to renew in time (L7).
	wake := ks.expires.Add(-m.lease(ks) / 2)
	if end.Before(wake) || (m.cfg.Mutations.renewAtLapse() && !m.needsRenew(at.Time(), ks)) {
		wake = end
	}
	s.timers.Add(ks, wake)
	// Field by field: a composite literal is built in a temporary and
	// copied, a measurable part of the repeat lock.
	a.Slot, a.Token, a.Expires, a.Signed = ks.active, m.dtok(ks).Section(uint64(ks.sections)), end, ks.signed()
}

// handleEnd is when the admitted critical section must stop.
func (m *Machine) handleEnd(ks *keyState) time.Time {
	if h := m.handleOf(ks); !h.leaseEnd.IsZero() && h.leaseEnd.Before(ks.expires) {
		return h.leaseEnd.Time()
	}
	return ks.expires.Time()
}
