package delegation

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// service brings one key up to date at now: expiries, deadlines, drains,
// admissions, renewals, (re)sends, and its next wake-up.
func (m *Machine) service(now time.Time, key string, ks *keyState) {
	if ks.phase == held && !now.Before(ks.expires) {
		m.stats.Expired++
		m.lose(now, ks, key, "delegation lease expired")
	}
	if ks.active != nil && !now.Before(ks.handleEnd()) {
		m.event(Event{Kind: Revoked, Key: key, Locker: ks.active.locker, Token: ks.token, Reason: ReasonLeaseExpired})
		ks.active = nil
	}
	m.failOverdue(now, key, ks)

	switch ks.phase {
	case held:
		if ks.active == nil && !ks.settling && m.shouldDrain(now, ks) {
			m.drain(now, key, ks)
			break
		}
		if ks.active == nil && len(ks.queue) > 0 && m.canAdmit(now, ks) {
			w := ks.queue[0]
			ks.queue = ks.queue[1:]
			m.event(m.admit(now, key, ks, w.locker, w.lease))
		}
		if m.needsRenew(now, ks) && !now.Before(ks.renewAt) {
			m.sendRenew(now, key, ks)
		}
	case requested:
		if len(ks.queue) == 0 {
			m.send(ks.target.ID, msg.Withdraw{Key: key, Req: ks.req})
			ks.phase = idle
			ks.req = msg.RequestID{}
		} else if !now.Before(ks.nextSend) {
			m.sendAcquire(now, key, ks)
		}
	}
	// Lockers still wait after the delegation went back (released above, or
	// lost): ask again at once, behind whoever waits at the home.
	if ks.phase == idle && len(ks.queue) > 0 {
		m.request(now, key, ks)
	}
	m.reschedule(now, key, ks)
}

// shouldDrain: recalled (or a contended grant used up), a contended grant
// nobody here wants any more, or an idle delegation about to lapse (released
// early so its home need not wait it out).
func (m *Machine) shouldDrain(now time.Time, ks *keyState) bool {
	switch {
	case ks.left == 0:
		return true
	case len(ks.queue) > 0:
		return false
	case ks.left > 0:
		return true
	}
	return ks.expires.Sub(now) <= m.lapseMargin()
}

func (m *Machine) lapseMargin() time.Duration { return 2 * m.cfg.MinUseful }

// needsRenew: renew only while the key is in use, once half the lease is gone.
func (m *Machine) needsRenew(now time.Time, ks *keyState) bool {
	if ks.phase != held || ks.settling || ks.left >= 0 {
		return false
	}
	inUse := ks.active != nil || len(ks.queue) > 0
	return inUse && ks.expires.Sub(now) < ks.lease/2
}

func (m *Machine) reschedule(now time.Time, key string, ks *keyState) {
	var at time.Time
	pick := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	switch ks.phase {
	case held:
		pick(ks.expires)
		if ks.active != nil {
			pick(ks.handleEnd())
		}
		switch {
		case ks.settling || ks.left >= 0:
			// Draining or a one-shot grant: no renewal, no lapse release.
		case ks.active != nil || len(ks.queue) > 0:
			pick(later(ks.renewAt, ks.expires.Add(-ks.lease/2)))
		default:
			pick(ks.expires.Add(-m.lapseMargin()))
		}
	case requested:
		pick(ks.nextSend)
	}
	for _, w := range ks.queue {
		pick(w.deadline)
	}
	if at.IsZero() {
		if ks.phase == idle && len(ks.queue) == 0 && ks.active == nil {
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
	if ks.releasedAt.IsZero() || now.Sub(ks.releasedAt) >= keep {
		delete(m.keys, key)
		m.timers.Remove(ks)
		return
	}
	m.schedule(ks, ks.releasedAt.Add(keep))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// failOverdue answers queued lockers whose deadline passed.
func (m *Machine) failOverdue(now time.Time, key string, ks *keyState) {
	kept := ks.queue[:0]
	for _, w := range ks.queue {
		if now.Before(w.deadline) || w.deadline.IsZero() {
			kept = append(kept, w)
			continue
		}
		reason, detail := ReasonUnavailable, ks.detail
		if ks.phase == held || ks.waitReason == msg.WaitHolder {
			reason = ReasonTimeout
		}
		if detail == "" {
			detail = m.waitDetail(ks)
		}
		m.event(Event{Kind: Failed, Key: key, Locker: w.locker, Reason: reason, Detail: detail})
	}
	ks.queue = kept
}

func (m *Machine) waitDetail(ks *keyState) string {
	switch ks.waitReason {
	case msg.WaitHolder:
		return "queued behind another holder"
	case msg.WaitGate:
		return fmt.Sprintf("home %s is in its activation gate", ks.target.ID)
	case msg.WaitLiveness:
		return fmt.Sprintf("home %s has no epoch liveness", ks.target.ID)
	}
	if ks.target.ID == "" {
		return "no home known for the key (no epoch learned)"
	}
	return fmt.Sprintf("no answer from home %s", ks.target.ID)
}

// request starts a new Acquire. Request IDs only grow, across restarts too,
// since they start with this incarnation (H6).
func (m *Machine) request(now time.Time, key string, ks *keyState) {
	m.seq++
	ks.phase = requested
	ks.req = msg.RequestID{Inc: m.cfg.Inc, Seq: m.seq}
	ks.attempts = attemptLog{}
	ks.earlyRecall = fence.Token{}
	ks.waitReason, ks.detail = 0, ""
	ks.target = msg.Member{}
	if m.ring != nil {
		ks.target, _ = m.ring.Home(key)
	}
	m.sendAcquire(now, key, ks)
}

func (m *Machine) sendAcquire(now time.Time, key string, ks *keyState) {
	ks.nextSend = now.Add(m.cfg.RetryInterval)
	if ks.target.ID == "" {
		if m.ring == nil {
			return
		}
		if ks.target, _ = m.ring.Home(key); ks.target.ID == "" {
			return
		}
	}
	n := ks.attempts.next(now)
	m.send(ks.target.ID, msg.Acquire{Key: key, Req: ks.req, Attempt: n, Lease: m.cfg.Lease})
}

func (m *Machine) sendRenew(now time.Time, key string, ks *keyState) {
	ks.renewAt = now.Add(m.cfg.RetryInterval)
	n := ks.renews.next(now)
	m.send(ks.issuer.ID, msg.Renew{Key: key, Token: ks.token, Attempt: n, Lease: m.cfg.Lease})
}

// drain ends the delegation cleanly: settle the writes admitted under it,
// then Release with the store's barrier. A holder that admitted nothing
// passes on the barrier it inherited (H18).
func (m *Machine) drain(now time.Time, key string, ks *keyState) {
	if ks.admitted == 0 && !m.cfg.Mutations.OwnBarrier {
		m.release(now, key, ks, ks.inherited)
		return
	}
	barrier := ks.inherited
	if ks.admitted == 0 {
		barrier = nil // OwnBarrier: the store returns its own (older) position
	}
	ks.settling = true
	m.event(Event{Kind: Settle, Key: key, Token: ks.token, Barrier: barrier, Deadline: ks.expires})
}

func (m *Machine) release(now time.Time, key string, ks *keyState, barrier []byte) {
	m.stats.Releases++
	m.send(ks.issuer.ID, msg.Release{Key: key, Token: ks.token, Barrier: barrier})
	ks.lastToken, ks.lastBarrier, ks.lastSent, ks.releasedAt = ks.token, barrier, true, now
	m.clearDelegation(ks)
}

// lose drops the delegation without a Release (expired, clock jump, hook
// failure): the home waits it out.
func (m *Machine) lose(now time.Time, ks *keyState, key string, why string) {
	if ks.active != nil {
		m.event(Event{Kind: Revoked, Key: key, Locker: ks.active.locker, Token: ks.token, Reason: ReasonLeaseExpired, Detail: why})
		ks.active = nil
	}
	ks.lastToken, ks.lastBarrier, ks.lastSent, ks.releasedAt = ks.token, nil, false, now
	m.clearDelegation(ks)
}

func (m *Machine) clearDelegation(ks *keyState) {
	ks.phase = idle
	ks.token, ks.issuer, ks.issuerInc = fence.Token{}, msg.Member{}, 0
	ks.inherited, ks.signed = nil, nil
	ks.fresh, ks.freshAsk, ks.settling = false, false, false
	ks.admitted, ks.left = 0, -1
	ks.renews, ks.renewAt = attemptLog{}, time.Time{}
}
