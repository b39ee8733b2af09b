package delegation

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// Grant installs a delegation if it answers the outstanding request in time;
// any other Grant is answered with a Release of its token, so a lost or late
// reply never leaves a second holder (H6).
func (m *Machine) Grant(now time.Time, env msg.Envelope, g msg.Grant) {
	ks := m.get(g.Key)
	if ks != nil && ks.phase == held && m.dtok(ks).Is(g.Token) {
		return // a duplicate of what we hold
	}
	if ks != nil && ks.last().token == g.Token {
		// A duplicate of a delegation this process held and ended: answer
		// as its end did (a Recall likewise). Giving it back with the
		// Grant's barrier would hand on one older than the writes made
		// under it, and one lost without a Release (expired, clock jump)
		// the home must wait out, not hear of early.
		m.stats.Unused++
		if l := ks.last(); l.sent {
			m.send(env.From.ID, msg.Release{Key: g.Key, Token: g.Token, Barrier: l.barrier})
		}
		return
	}
	if ks == nil || ks.phase != requested || ks.more().req != g.Req {
		m.stats.Unused++
		m.send(env.From.ID, msg.Release{Key: g.Key, Token: g.Token, Barrier: g.Barrier})
		return
	}
	if m.grantedBeforeMember(g.Token.Epoch) && !m.cfg.Mutations.grantToAnyStore() {
		// Granted to the node's wiped old store, whose request had this
		// one's number (H31). Its home answers for that store; nothing
		// goes back from this one.
		m.stats.Unused++
		return
	}
	x := ks.edit()
	anchor, ok := x.attempts.sentAt(x.attemptN, g.Attempt)
	if m.cfg.Mutations.anchorAtReceipt() {
		anchor, ok = now, true
	}
	lease := m.shorten(g.Lease)
	expires := anchor.Add(lease)
	recalled := g.Recalled || x.earlyRecall == g.Token
	if !ok || expires.Sub(now) <= m.cfg.MinUseful || (recalled && len(ks.queue()) == 0) {
		// Late or unanchored, or recalled with nobody left to use it: use
		// nothing, give it back, and ask again if lockers still wait.
		m.stats.Unused++
		m.send(env.From.ID, msg.Release{Key: g.Key, Token: g.Token, Barrier: g.Barrier})
		m.setPhase(ks, idle)
		x.req = msg.RequestID{}
		m.service(now, g.Key, ks)
		return
	}
	m.setPhase(ks, held)
	// The request is answered: nothing of it is read again before the next
	// one starts (request), except what explains later failures.
	x.req, x.attemptN, x.attempts, x.nextSend, x.earlyRecall = msg.RequestID{}, 0, attemptLog{}, time.Time{}, fence.Token{}
	if x.target.ID == env.From.ID {
		x.target = msg.Member{}
		ks.set(targetIsIssuer, true)
	}
	ks.counter, ks.sections = g.Token.Counter, 0
	m.setOrigin(ks, g.Token, env.From, env.FromInc)
	ks.expires = deadline.At(expires)
	m.setLease(ks, g.Lease)
	ks.setGrantBytes(g.Barrier, g.Signed)
	ks.set(admitted, false)
	ks.left = -1
	if g.Contended || recalled {
		// Recalled before it arrived (its Recall overtook it, or a re-sent
		// Grant says so): the head locker still gets its one section, as
		// under a contended Grant and as when the Recall follows the Grant
		// (Recall). Given back unused, it would cost a contender its turn,
		// and two contenders could hand the key to and fro without either
		// ever admitting.
		ks.left = 1
		if recalled && m.cfg.Mutations.admitRecalledGrant() {
			ks.left = -1
		}
	}
	ks.set(fresh, len(g.Barrier) == 0)
	if !ks.is(fresh) {
		ks.set(freshAsk, true)
		m.event(Event{Kind: WaitFresh, Key: g.Key, Token: g.Token, Barrier: g.Barrier, Deadline: expires})
	}
	m.service(now, g.Key, ks)
}

// Wait records why the outstanding request is queued.
func (m *Machine) Wait(now time.Time, w msg.Wait) {
	if ks := m.get(w.Key); ks != nil && ks.phase == requested && ks.more().req == w.Req {
		ks.waitReason, ks.edit().detail = w.Reason, ""
	}
}

// NotHome: the receiver is not the key's home in its epoch. The driver brings
// the epochs in line; the request is retargeted and resent at its next retry.
func (m *Machine) NotHome(now time.Time, env msg.Envelope, n msg.NotHome) {
	ks := m.get(n.Key)
	if ks == nil || ks.phase != requested || ks.more().req != n.Req {
		return
	}
	x := ks.edit()
	x.detail = fmt.Sprintf("node %s is not the key's home in epoch %d", env.From.ID, env.Epoch)
	if m.ring != nil {
		if h, ok := m.ring.Home(n.Key); ok && !h.Same(x.target) {
			x.target = h
			x.nextSend = now
			m.service(now, n.Key, ks)
		}
	}
}

// Refused fails every local locker waiting on the request.
func (m *Machine) Refused(now time.Time, env msg.Envelope, r msg.Refused) {
	ks := m.get(r.Key)
	if ks == nil || ks.phase != requested || ks.more().req != r.Req {
		return
	}
	reason := ReasonUnavailable
	if r.Reason == msg.RefusedTooManyDelegations {
		reason = ReasonTooMany
	}
	detail := fmt.Sprintf("home %s refused: %s", env.From.ID, r.Reason)
	for _, w := range ks.queue() {
		m.event(Event{Kind: Failed, Key: r.Key, Locker: w.locker, Reason: reason, Detail: detail})
	}
	m.setQueue(ks, nil)
	m.setPhase(ks, idle)
	ks.edit().req = msg.RequestID{}
	m.service(now, r.Key, ks)
}

// Recall: stop admitting, drain after the admitted critical section ends. A
// Recall that overtakes its Grant marks the request; a Recall for a token no
// longer held is answered with that token's Release again.
func (m *Machine) Recall(now time.Time, env msg.Envelope, r msg.Recall) {
	ks := m.get(r.Key)
	switch {
	case ks != nil && ks.phase == held && m.dtok(ks).Is(r.Token):
		if m.cfg.Mutations.ignoreRecall() && ks.active != 0 {
			return
		}
		// No new critical section on a recalled delegation, except the first:
		// a holder recalled before it admitted anything (it was waiting for
		// freshness, or the recall followed the grant at once) admits its
		// head locker once, as under a contended grant. Giving the key back
		// unused would let a contender lose every turn.
		ks.left = 0
		if (!ks.is(admitted) || m.cfg.Mutations.admitAfterRecall()) && len(ks.queue()) > 0 {
			ks.left = 1
		}
		m.service(now, r.Key, ks)
	case ks != nil && ks.phase == requested:
		// Tokens grow, and the outstanding request's Grant carries the
		// newest: an older Recall, arriving late, must not replace the mark
		// of a newer one that overtook its Grant.
		if x := ks.edit(); x.earlyRecall.Less(r.Token) {
			x.earlyRecall = r.Token
		}
	case ks != nil && ks.last().token == r.Token:
		if l := ks.last(); l.sent {
			m.send(env.From.ID, msg.Release{Key: r.Key, Token: r.Token, Barrier: l.barrier})
		}
	default:
		// Never held here: releasing it is what its home needs.
		m.send(env.From.ID, msg.Release{Key: r.Key, Token: r.Token})
	}
}

// RenewReply extends the delegation from the send of the attempt it echoes;
// a refusal counts as a Recall.
func (m *Machine) RenewReply(now time.Time, env msg.Envelope, r msg.RenewReply) {
	ks := m.get(r.Key)
	if ks == nil || ks.phase != held || !m.dtok(ks).Is(r.Token) {
		return
	}
	if !r.OK && m.cfg.Mutations.ignoreRenewRefusal() {
		return
	}
	if !r.OK {
		ks.left = 0
		ks.set(refused, true)
		m.service(now, r.Key, ks)
		return
	}
	sent, ok := ks.more().renewals.sentAt(ks.renews, r.Attempt)
	if !ok {
		return
	}
	if m.cfg.Mutations.renewAnchorAtReceipt() {
		sent = now
	}
	if h, ok := m.homeNow(ks); ok && h.Same(env.From) {
		// The key's new home took the delegation over: it renews it from
		// now on, frees it on our Release, and reclaims it if it restarts.
		m.setIssuer(ks, env.From, env.FromInc, true)
	}
	if e := deadline.At(sent.Add(m.shorten(r.Lease))); e.After(ks.expires) {
		ks.expires = e
		m.setLease(ks, r.Lease)
		x := ks.edit()
		x.renewAt = time.Time{}
		x.renewals = attemptLog{}
		if h := m.handleOf(ks); h != nil {
			m.event(Event{Kind: Extended, Slot: ks.active, Key: r.Key, Locker: h.locker, Token: m.dtok(ks).Section(uint64(ks.sections)), Expires: m.handleEnd(ks)})
		}
	}
	m.service(now, r.Key, ks)
}

// Settled reports the store's barrier hook for (key, token). A completion for
// any other token is dropped (H20); a failed hook sends no Release.
func (m *Machine) Settled(now time.Time, key string, tok fence.Token, barrier []byte, err error) {
	ks := m.get(key)
	if ks == nil || ks.phase != held || !ks.is(settling) || (!m.dtok(ks).Is(tok) && !m.cfg.Mutations.untaggedHooks()) {
		return
	}
	if err != nil {
		m.lose(now, ks, key, "settle hook failed: "+err.Error())
		m.service(now, key, ks)
		return
	}
	m.release(now, key, ks, barrier)
	m.service(now, key, ks)
}

// Fresh reports the store's wait hook for (key, token): the successor may
// admit once the store caught up with the inherited barrier.
func (m *Machine) Fresh(now time.Time, key string, tok fence.Token, err error) {
	ks := m.get(key)
	if ks == nil || ks.phase != held || !m.dtok(ks).Is(tok) || !ks.is(freshAsk) {
		return
	}
	ks.set(freshAsk, false)
	if err != nil {
		for _, w := range ks.queue() {
			m.event(Event{Kind: Failed, Key: key, Locker: w.locker, Reason: ReasonHookFailed, Detail: "wait-fresh hook: " + err.Error()})
		}
		m.setQueue(ks, nil)
		m.release(now, key, ks, ks.inherited())
		m.service(now, key, ks)
		return
	}
	ks.set(fresh, true)
	m.service(now, key, ks)
}

// reclaimable says whether a Reclaim from the issuer's incarnation inc
// covers ks's delegation. By the token's incarnation, not the issuer's as
// last recorded: a delegation already adopted by this reclaiming incarnation
// is reported again, so answers are idempotent. The home may receive a
// repeated Reclaim's answer first (reordered) and must not take an empty one
// for the truth (seed 5522 of the simulator). A delegation taken over from
// another home has a token of that home's incarnations: by the taking
// incarnation then, reported to it again as well (the home skips a token it
// already has).
func (m *Machine) reclaimable(ks *keyState, inc uint64) bool {
	if o := m.origins.Get(ks.origin); o.takenOver {
		return o.issuer.Inc <= inc
	}
	t := m.dtok(ks).Incarnation
	return t < inc && (!m.cfg.Mutations.reclaimLastIncOnly() || t+1 == inc)
}

// Reclaim answers a restarted home (env.FromInc is its new incarnation): the
// delegations held from its earlier incarnations, which it adopts. Requests
// and renewals outstanding at it are restarted; the driver discards replies
// from its older incarnations from now on (H1, H11).
func (m *Machine) Reclaim(now time.Time, env msg.Envelope) {
	var kept []msg.HeldDelegation
	for _, key := range m.sortedKeys() {
		ks := m.get(key)
		if ks == nil {
			continue
		}
		switch {
		case ks.phase == held && m.issuer(ks).ID == env.From.ID && m.reclaimable(ks, env.FromInc):
			kept = append(kept, msg.HeldDelegation{Key: key, Token: m.tok(ks), Remaining: ks.expires.Time().Sub(now), Barrier: ks.inherited()})
			if m.issuer(ks).Inc < env.FromInc {
				m.setIssuer(ks, env.From, env.FromInc, false)
				if x := ks.extra(); x != nil && x.motion != nil {
					x.motion.renewAt = time.Time{}
					ks.trim()
				}
			}
		case ks.phase == requested && ks.more().target.ID == env.From.ID:
			ks.edit().nextSend = now
			m.service(now, key, ks)
		}
	}
	m.send(env.From.ID, msg.ReclaimAnswer{ForInc: env.FromInc, Held: kept})
}
