package delegation

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// service brings one key up to date at now: expiries, deadlines, drains,
// admissions, renewals, (re)sends, and its next wake-up.
func (m *Machine) service(now time.Time, key string, ks *keyState) {
	if ks.phase == held && !now.Before(ks.expires.Time()) {
		m.stats.Expired++
		m.lose(now, ks, key, "delegation lease expired")
	}
	// A section outlives the check above only while held, so what ends
	// it here is its own lease, shorter than the delegation's.
	if ks.active != 0 && !now.Before(m.handleEnd(ks)) {
		s := m.shardOf(key)
		m.event(Event{Kind: Revoked, Slot: ks.active, Key: key, Locker: s.handle(ks).locker, Token: m.tok(ks), Reason: ReasonLeaseExpired, Detail: DetailLeaseRanOut})
		s.endActive(ks)
	}
	m.failOverdue(now, key, ks)

	switch ks.phase {
	case held:
		if ks.active == 0 && !ks.is(settling) && m.shouldDrain(now, ks) {
			m.drain(now, key, ks)
			break
		}
		if q, at := ks.queue(), deadline.At(now); ks.active == 0 && len(q) > 0 && m.canAdmit(at, ks) {
			w := q[0]
			m.setQueue(ks, q[1:])
			var a Admission
			m.admit(at, m.shardOf(key), ks, w.locker, w.lease, &a)
			m.event(a.event(key, w.locker))
		}
		if m.needsRenew(now, ks) && !now.Before(ks.more().renewAt) {
			m.sendRenew(now, key, ks)
		}
	case requested:
		if x := ks.more(); len(x.queue) == 0 {
			m.send(x.target.ID, msg.Withdraw{Key: key, Req: x.req})
			m.setPhase(ks, idle)
			ks.edit().req = msg.RequestID{}
		} else if !now.Before(x.nextSend) {
			m.sendAcquire(now, key, ks)
		}
	}
	// Lockers still wait after the delegation went back (released above, or
	// lost): ask again at once, behind whoever waits at the home.
	if ks.phase == idle && len(ks.queue()) > 0 {
		m.request(now, key, ks)
	}
	ks.set(handedOn, false)
	ks.trim()
	m.reschedule(now, key, ks)
}

// shouldDrain: recalled (or a contended grant used up), a contended grant
// nobody here wants any more, or an idle delegation about to lapse (released
// early so its home need not wait it out).
func (m *Machine) shouldDrain(now time.Time, ks *keyState) bool {
	switch {
	case ks.left == 0:
		return true
	case len(ks.queue()) > 0:
		return false
	case ks.left > 0:
		return true
	}
	return ks.expires.Time().Sub(now) <= m.lapseMargin()
}

func (m *Machine) lapseMargin() time.Duration { return 2 * m.cfg.MinUseful }

// needsRenew: renew once half the lease is gone while a critical section
// runs (recalled or not: a live section keeps its lock, L6), or while local
// lockers queue on a delegation that may still admit them.
func (m *Machine) needsRenew(now time.Time, ks *keyState) bool {
	return m.renewing(ks) && ks.expires.Sub(deadline.At(now)) < m.lease(ks)/2
}

// renewing: the delegation is renewed at half its lease rather than left
// to lapse or drain. A one-shot delegation (contended, or recalled before
// it admitted) whose head locker still waits is renewed too: its wait-fresh
// hook can outlast half the lease, and without the renewal the turn could
// never be used (less than MinUseful left at the hook's end) while the
// delegation sat unused until its home waited it out, lease and Skew, for
// every contender in turn (lease 400 ms, hooks 300 ms in the simulator).
func (m *Machine) renewing(ks *keyState) bool {
	if ks.phase != held || ks.is(settling|refused) {
		return false
	}
	return ks.active != 0 || (ks.left != 0 && len(ks.queue()) > 0)
}

func (m *Machine) reschedule(now time.Time, key string, ks *keyState) {
	var at time.Time
	pick := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	x := ks.more()
	switch ks.phase {
	case held:
		expires := ks.expires.Time()
		pick(expires)
		if ks.active != 0 {
			pick(m.handleEnd(ks))
		}
		switch {
		case m.renewing(ks):
			pick(later(x.renewAt, expires.Add(-m.lease(ks)/2)))
		case ks.is(settling) || ks.left >= 0:
			// Draining, or a one-shot grant with no section running and
			// nobody here waiting for its turn: no renewal, no lapse
			// release.
		default:
			pick(expires.Add(-m.lapseMargin()))
		}
	case requested:
		pick(x.nextSend)
	}
	for _, w := range x.queue {
		pick(w.deadline)
		if at := m.giveWayAt(ks, w); at.After(now) {
			pick(at)
		}
	}
	if at.IsZero() {
		if ks.phase == idle && len(x.queue) == 0 && ks.active == 0 {
			m.maybeForget(now, key, ks)
		}
		return
	}
	if !at.After(now) {
		at = now.Add(time.Nanosecond)
	}
	m.schedule(ks, at)
}

// maybeForget drops an idle key once a repeated Recall for its last token can
// no longer come (the home recalls once, within its lease of the grant).
func (m *Machine) maybeForget(now time.Time, key string, ks *keyState) {
	keep := 2 * m.cfg.Lease
	releasedAt := ks.last().at
	if releasedAt.IsZero() || deadline.At(now).Sub(releasedAt) >= keep {
		s := m.shardOf(key)
		s.keys.Delete(key)
		s.timers.Remove(ks)
		return
	}
	m.shardOf(key).timers.Add(ks, releasedAt.Add(keep))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// failOverdue answers queued lockers whose deadline passed, and those that
// give way to a silent home (giveWayAt).
func (m *Machine) failOverdue(now time.Time, key string, ks *keyState) {
	queue := ks.queue()
	if len(queue) == 0 {
		return
	}
	kept := queue[:0]
	for _, w := range queue {
		if now.Before(w.deadline) || w.deadline.IsZero() {
			if at := m.giveWayAt(ks, w); at.IsZero() || now.Before(at) {
				kept = append(kept, w)
				continue
			}
			// Nobody answered, so waitDetail says the home did not.
			m.event(Event{Kind: Failed, Key: key, Locker: w.locker, Reason: ReasonUnavailable,
				Detail: fmt.Sprintf("%s in %v", m.waitDetail(ks), w.silentFor)})
			continue
		}
		reason, detail := ReasonUnavailable, ks.more().detail
		if ks.phase == held || ks.waitReason == msg.WaitHolder {
			reason = ReasonTimeout
		}
		if ks.phase == held {
			// The delegation is here: what a home said while it was being
			// requested no longer explains the wait.
			detail = m.heldDetail(ks)
		}
		if detail == "" {
			detail = m.waitDetail(ks)
		}
		m.event(Event{Kind: Failed, Key: key, Locker: w.locker, Reason: reason, Detail: detail})
	}
	m.setQueue(ks, kept)
}

// giveWayAt is when w stops waiting for a home that answers nothing:
// silentFor after it queued and after its request's first attempt, while
// neither the home nor another node has answered that request. It is zero
// when w waits for its deadline alone: it has no silentFor, the key is
// held here (w queues behind a local section), or the home answered (it
// queues w behind a holder, or is in its gate, which ends on its own; asking
// another node would find the same home).
func (m *Machine) giveWayAt(ks *keyState, w localWaiter) time.Time {
	x := ks.more()
	answered := ks.waitReason != 0 || x.detail != ""
	if m.cfg.Mutations.giveWayWhileAnswered() {
		answered = false
	}
	if w.silentFor <= 0 || ks.phase != requested || answered || x.attemptN == 0 {
		return time.Time{}
	}
	from := w.since
	if first, ok := x.attempts.sentAt(x.attemptN, 1); ok && first.After(from) {
		from = first
	}
	return from.Add(w.silentFor)
}

func (m *Machine) heldDetail(ks *keyState) string {
	if ks.active != 0 {
		return fmt.Sprintf("queued behind a critical section on this node (delegation %s)", m.dtok(ks))
	}
	return fmt.Sprintf("delegation %s is held here but closed to new critical sections (recalled or renewing)", m.dtok(ks))
}

// NoAnswer begins the detail of a lock that failed because the key's home
// answered nothing: the home is down, paused, or cut off from this node
// (perhaps from this node alone, which another node may then reach).
const NoAnswer = "no answer from home"

func (m *Machine) waitDetail(ks *keyState) string {
	target := m.targetID(ks)
	switch ks.waitReason {
	case msg.WaitHolder:
		return "queued behind another holder"
	case msg.WaitGate:
		return fmt.Sprintf("home %s is in its activation gate", target)
	case msg.WaitLiveness:
		return fmt.Sprintf("home %s has no epoch liveness", target)
	}
	if target == "" {
		return "no home known for the key (no epoch learned)"
	}
	return NoAnswer + " " + string(target)
}

// request starts a new Acquire. Request IDs only grow, across restarts too,
// since they start with this incarnation (H6).
func (m *Machine) request(now time.Time, key string, ks *keyState) {
	m.seq++
	m.setPhase(ks, requested)
	x := ks.edit()
	x.req = msg.RequestID{Inc: m.cfg.Inc, Seq: m.seq}
	x.attemptN, x.attempts = 0, attemptLog{}
	x.earlyRecall = fence.Token{}
	ks.waitReason, x.detail = 0, ""
	x.target = msg.Member{}
	ks.set(targetIsIssuer, false)
	if m.ring != nil {
		x.target, _ = m.ring.Home(key)
	}
	// Asking again right after handing the delegation to waiters: this
	// request queues behind them, and says so, which spares the home a
	// Wait. Only the first attempt says it: a resend may find the queue
	// changed, and hears the home's Wait as any request does.
	queued := ks.is(handedOn)
	ks.set(handedOn, false)
	if queued {
		ks.waitReason = msg.WaitHolder
	}
	m.sendAcquireQueued(now, key, ks, queued)
}

func (m *Machine) sendAcquire(now time.Time, key string, ks *keyState) {
	m.sendAcquireQueued(now, key, ks, false)
}

func (m *Machine) sendAcquireQueued(now time.Time, key string, ks *keyState, queued bool) {
	x := ks.edit()
	x.nextSend = now.Add(m.cfg.RetryInterval)
	if x.target.ID == "" {
		if m.ring == nil {
			return
		}
		if x.target, _ = m.ring.Home(key); x.target.ID == "" {
			return
		}
	}
	x.attemptN++
	x.attempts.record(x.attemptN, now)
	m.send(x.target.ID, msg.Acquire{Key: key, Req: x.req, Attempt: x.attemptN, Lease: m.cfg.Lease, Queued: queued})
}

func (m *Machine) sendRenew(now time.Time, key string, ks *keyState) {
	x := ks.edit()
	x.renewAt = now.Add(m.cfg.RetryInterval)
	ks.renews++
	x.renewals.record(ks.renews, now)
	to := m.issuer(ks).Member
	if h, ok := m.homeNow(ks); ok && !m.cfg.Mutations.renewAtIssuer() {
		to = h // the old home refuses: ask the new one to take it over
	}
	m.send(to.ID, msg.Renew{Key: key, Token: m.tok(ks), Attempt: ks.renews, Lease: m.cfg.Lease})
}

// drain ends the delegation cleanly: settle the writes admitted under it,
// then Release with the store's barrier. A holder that admitted nothing
// passes on the barrier it inherited (H18).
func (m *Machine) drain(now time.Time, key string, ks *keyState) {
	if (!ks.is(admitted) || m.cfg.Mutations.skipSettle()) && !m.cfg.Mutations.ownBarrier() {
		m.release(now, key, ks, ks.inherited())
		return
	}
	barrier := ks.inherited()
	if !ks.is(admitted) {
		barrier = nil // OwnBarrier: the store returns its own (older) position
	}
	ks.set(settling, true)
	m.event(Event{Kind: Settle, Key: key, Token: m.tok(ks), Barrier: barrier, Deadline: ks.expires.Time()})
}

func (m *Machine) release(now time.Time, key string, ks *keyState, barrier []byte) {
	m.stats.Releases++
	m.send(m.issuer(ks).ID, msg.Release{Key: key, Token: m.tok(ks), Barrier: barrier})
	if h, ok := m.homeNow(ks); ok {
		// The new home may have taken it over before its answer reached us.
		m.send(h.ID, msg.Release{Key: key, Token: m.tok(ks), Barrier: barrier})
	}
	// Drained for waiters (recalled, or a contended grant used up), not
	// refused or lapsed: the home has others queued for the key.
	toWaiters := ks.left == 0 && !ks.is(refused)
	m.clearDelegation(ks, barrier, true, now)
	ks.set(handedOn, toWaiters)
}

// lose drops the delegation without a Release (expired, clock jump, hook
// failure): the home waits it out.
func (m *Machine) lose(now time.Time, ks *keyState, key string, why string) {
	if h := m.handleOf(ks); h != nil {
		m.event(Event{Kind: Revoked, Slot: ks.active, Key: key, Locker: h.locker, Token: m.tok(ks), Reason: ReasonLeaseExpired, Detail: why})
		m.shardOf(key).endActive(ks)
	}
	m.clearDelegation(ks, nil, false, now)
}

// clearDelegation ends the delegation, remembering its token and how it
// went back (sent, with barrier) to answer a repeated Recall.
func (m *Machine) clearDelegation(ks *keyState, barrier []byte, sent bool, now time.Time) {
	ks.setLast(lastRelease{token: m.tok(ks), barrier: barrier, at: deadline.At(now), sent: sent})
	if ks.is(targetIsIssuer) {
		// Only the target's ID is read from here on (waitDetail).
		ks.edit().target = msg.Member{ID: m.issuer(ks).ID}
		ks.set(targetIsIssuer, false)
	}
	m.setPhase(ks, idle)
	ks.counter, ks.sections = 0, 0
	m.origins.Unref(ks.origin)
	ks.origin = 0
	ks.set(fresh|freshAsk|settling|admitted|refused, false)
	ks.left = -1
	ks.renews = 0
	if x := ks.extra(); x != nil && x.motion != nil {
		x.motion.renewals, x.motion.renewAt = attemptLog{}, time.Time{}
	}
	// The lease and the grant's bytes are read only while a delegation is
	// held.
	m.setLease(ks, m.cfg.Lease)
	ks.setGrantBytes(nil, nil)
}

// schedule makes sure ks is served at or before at.
func (m *Machine) schedule(ks *keyState, at time.Time) {
	m.shardOf(ks.key).timers.Add(ks, deadline.At(at))
}
