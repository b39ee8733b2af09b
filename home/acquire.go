package home

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/dtoken"
	"github.com/homelock/homelock/msg"
)

// Acquire handles a request from env.From, whose header epoch the driver has
// checked equals ours.
func (m *Machine) Acquire(now time.Time, env msg.Envelope, a msg.Acquire) {
	cur := m.current()
	if cur == nil {
		m.send(env.From.ID, msg.Wait{Key: a.Key, Req: a.Req, Attempt: a.Attempt, Reason: msg.WaitLiveness})
		return
	}
	if !m.IsHome(a.Key) {
		m.send(env.From.ID, msg.NotHome{Key: a.Key, Req: a.Req})
		return
	}
	if reason, ok := m.admissible(cur, env.From, env.Version); !ok {
		m.stats.Refused++
		m.send(env.From.ID, msg.Refused{Key: a.Key, Req: a.Req, Reason: reason})
		// A refused requester fails its lockers: whatever it asks next is a
		// new request and queues from now, not from where the refused one
		// stood (fairness).
		if ke := m.keys.Get(a.Key); ke != nil {
			m.removeWaiterFrom(ke, env.From.ID)
		}
		return
	}
	ke := m.entry(a.Key)
	if ke.deleg() != nil && m.req(ke) == a.Req && m.holder(ke).Same(env.From) {
		// A retransmission: the same grant while it is live, never a second
		// holder (a lost reply). It echoes the attempt it first answered (H6),
		// signed again if the first was: the home keeps no signed bytes.
		var signed []byte
		if ke.is(signedGrant) {
			signed = m.sign(ke)
		}
		m.sendGrant(ke, signed)
		return
	}
	w := m.waiterFor(ke, env.From)
	if w == nil {
		if m.cfg.MaxWaiters > 0 && len(ke.waiters()) >= m.cfg.MaxWaiters {
			m.stats.Refused++
			m.send(env.From.ID, msg.Refused{Key: a.Key, Req: a.Req, Reason: msg.RefusedTooManyDelegations})
			return
		}
		w = &waiter{from: env.From, since: now}
		x := ke.edit()
		x.waiters = append(x.waiters, w)
		m.waiting++
	}
	if w.req.Less(a.Req) || (w.req == a.Req && !m.cfg.Mutations.echoFirstAttempt()) {
		w.req, w.attempt, w.lease, w.fromInc = a.Req, a.Attempt, a.Lease, env.FromInc
	}
	w.lastHeard = now
	if reason := m.serve(now, a.Key, ke); reason != 0 && m.stillWaiting(ke, env.From, a.Req) {
		// Wait only tells the requester why it waits: say it when that is
		// news, and now and then, not to every retry (a hot key's home
		// would spend half its sends on it). A requester that asks again
		// as it hands the key on knows it waits for a holder (Queued):
		// that is no news, and it changes nothing else here.
		if a.Queued && reason == msg.WaitHolder {
			w.told = reason
		} else if reason != w.told || a.Attempt%waitEvery == 1 {
			w.told = reason
			m.send(env.From.ID, msg.Wait{Key: a.Key, Req: a.Req, Attempt: a.Attempt, Reason: reason})
		}
	}
}

// admissible applies the membership and version rules to a requester that
// speaks version v.
func (m *Machine) admissible(cur *epochView, from msg.Member, v uint32) (msg.RefuseReason, bool) {
	mem, ok := cur.e.Member(from.ID)
	if !ok || mem.Store != from.Store {
		return msg.RefusedNotMember, false
	}
	// Versions match exactly, both as advertised in the epoch and as spoken.
	if mem.Version != m.cfg.Self.Version || v != m.cfg.Self.Version {
		return msg.RefusedVersion, false
	}
	return 0, true
}

func (m *Machine) removeWaiterFrom(ke *entry, from msg.NodeID) {
	for i, w := range ke.waiters() {
		if w.from.ID == from {
			m.removeWaiter(ke, i)
			return
		}
	}
}

// refuseNonMembers drops the waiters the current epoch no longer admits,
// refusing them as their next retry would be: a requester the epoch left out
// is granted nothing, and does not keep its place for when it is back.
func (m *Machine) refuseNonMembers(key string, ke *entry) {
	cur := m.current()
	if cur == nil {
		return
	}
	ws := ke.waiters()
	for i := 0; i < len(ws); {
		w := ws[i]
		reason, ok := m.admissible(cur, w.from, w.from.Version)
		if ok {
			i++
			continue
		}
		m.removeWaiter(ke, i)
		ws = ke.waiters()
		m.stats.Refused++
		m.send(w.from.ID, msg.Refused{Key: key, Req: w.req, Reason: reason})
	}
}

func (m *Machine) waiterFor(ke *entry, from msg.Member) *waiter {
	for _, w := range ke.waiters() {
		if w.from.ID == from.ID {
			return w
		}
	}
	return nil
}

func (m *Machine) stillWaiting(ke *entry, from msg.Member, req msg.RequestID) bool {
	w := m.waiterFor(ke, from)
	return w != nil && w.req == req
}

// serve brings key's state up to date at now: expiry, stale waiters, moved
// keys, recalls, grants, DrainQueries. It returns why the head waiter (if any)
// still waits.
func (m *Machine) serve(now time.Time, key string, ke *entry) msg.WaitReason {
	if d := ke.deleg(); d != nil && !deadline.At(now).Before(d.expires) {
		m.free(now, ke, false, nil)
	}
	m.dropStaleWaiters(now, ke)
	m.refuseNonMembers(key, ke)
	home := m.IsHome(key)
	if ws := ke.waiters(); !home && len(ws) > 0 {
		for _, w := range ws {
			m.send(w.from.ID, msg.NotHome{Key: key, Req: w.req})
		}
		x := ke.extra()
		m.waiting -= len(x.waiters)
		x.waiters = nil
	}
	m.answerQueries(now, key, ke)

	var reason msg.WaitReason
	switch d := ke.deleg(); {
	case d != nil:
		if !ke.is(recalled) && (len(ke.waiters()) > 0 || !home || !m.holderIsMember(ke)) {
			ke.set(recalled, true)
			m.stats.Recalls++
			m.send(m.holder(ke).ID, msg.Recall{Key: key, Token: m.dtok(ke).Token()})
		}
		m.timers.Add(ke, d.expires)
		reason = msg.WaitHolder
	case len(ke.waiters()) > 0:
		reason = m.tryGrant(now, key, ke)
	}
	if ws := ke.waiters(); len(ws) > 0 {
		m.schedule(ke, ws[0].lastHeard.Add(StaleWaiters*m.cfg.RetryInterval))
	}
	ke.trim()
	m.gc(now, key, ke)
	return reason
}

func (m *Machine) holderIsMember(ke *entry) bool {
	if m.cfg.Mutations.renewNonMembers() {
		return true
	}
	cur := m.current()
	return cur != nil && cur.e.Has(m.holder(ke).Member)
}

func (m *Machine) dropStaleWaiters(now time.Time, ke *entry) {
	x := ke.extra()
	if x == nil || len(x.waiters) == 0 {
		return
	}
	kept := x.waiters[:0]
	for _, w := range x.waiters {
		if now.Sub(w.lastHeard) < StaleWaiters*m.cfg.RetryInterval {
			kept = append(kept, w)
		}
	}
	m.waiting -= len(x.waiters) - len(kept)
	clear(x.waiters[len(kept):])
	x.waiters = kept
	if len(kept) == 0 {
		x.waiters = nil
	}
}

// tryGrant grants the key to its oldest waiter if the gate, liveness and caps
// allow, and says what blocks it otherwise.
func (m *Machine) tryGrant(now time.Time, key string, ke *entry) msg.WaitReason {
	if gate, from := m.gateFor(key, ke); gate.After(now) {
		m.schedule(ke, gate)
		m.queryDrain(now, key, ke, from)
		return msg.WaitGate
	}
	if !m.isLive(now) {
		m.needLiveness[key] = struct{}{}
		return msg.WaitLiveness
	}
	i := 0
	if m.cfg.Mutations.lifo() {
		i = len(ke.waiters()) - 1
	}
	w := ke.waiters()[i]
	if m.atCap(w.from.ID) {
		m.removeWaiter(ke, i)
		m.stats.Refused++
		m.send(w.from.ID, msg.Refused{Key: key, Req: w.req, Reason: msg.RefusedTooManyDelegations})
		return 0
	}
	m.removeWaiter(ke, i)
	m.grant(now, key, ke, w)
	return msg.WaitHolder
}

func (m *Machine) atCap(holder msg.NodeID) bool {
	return (m.cfg.MaxDelegations > 0 && m.live >= m.cfg.MaxDelegations) ||
		(m.cfg.MaxPerRequester > 0 && m.byHold[holder] >= m.cfg.MaxPerRequester)
}

func (m *Machine) grant(now time.Time, key string, ke *entry, w *waiter) {
	cur := m.current()
	lease := w.lease
	if lease <= 0 || lease > m.cfg.MaxLease {
		lease = m.cfg.MaxLease
	}
	// Delegations never outlive the home's liveness, nor does the home's
	// own record of one (lease + Skew): that is what lets a new epoch's gate
	// bound every delegation of the old one, with room for the lag of a
	// lease clock under the jump threshold (docs/design.md, "Clock jumps").
	if left := m.liveLeft(now); lease > left && !m.cfg.Mutations.grantPastLiveness() {
		lease = left
	}
	skew := m.cfg.Skew
	if m.cfg.Mutations.grantExpiryNoSkew() {
		skew = 0
	}
	m.counter++
	tok := dtoken.T{Epoch: cur.e.Number, Incarnation: m.cfg.Inc, Counter: m.counter}
	d := delegation{
		holder:  m.peers.Ref(peer{w.from, w.fromInc}),
		attempt: w.attempt,
		expires: deadline.At(now.Add(lease + skew)),
	}
	m.setDeleg(ke, d, lease, tok, w.req, ke.barrier())
	// A signer that fails (nil) leaves the delegation unsigned, re-sent
	// Grants included.
	signed := m.sign(ke)
	ke.set(signedGrant, signed != nil)
	ke.set(contended, len(ke.waiters()) > 0)
	if x := ke.extra(); x != nil {
		// Read only while no delegation is live (gc), and set when it ends.
		x.idleSince = time.Time{}
		x.waitedSince = w.since
	}
	m.live++
	m.byHold[w.from.ID]++
	m.stats.Grants++
	m.sendGrant(ke, signed)
	// A contended grant already tells the holder to drain after one critical
	// section; no separate Recall is needed for the waiters queued now.
	ke.set(recalled, ke.is(contended))
	m.timers.Add(ke, ke.d.expires)
}

// sendGrant sends ke's live delegation to its holder, with signed, its
// signed grant (nil: none).
func (m *Machine) sendGrant(ke *entry, signed []byte) {
	d := &ke.d
	m.send(m.holder(ke).ID, msg.Grant{
		Key: ke.key, Req: m.req(ke), Attempt: d.attempt, Token: m.dtok(ke).Token(), Lease: m.lease(ke),
		Barrier: ke.given(), Recalled: ke.is(recalled) && !ke.is(contended), Contended: ke.is(contended), Signed: signed,
	})
}

// sign returns the signed grant for ke's live delegation, built from what
// the entry keeps (key, holder, request, token and its epoch, the lease as
// last granted or renewed), or nil without a signer. The first Grant and
// any re-sent one are signed here alike, so the home need not keep the
// signed bytes: a million idle delegations would otherwise keep about 290
// bytes each for a retransmission that seldom comes. A Guard's operation
// root leaves the lease out, so a re-signing after a renewal fences alike.
func (m *Machine) sign(ke *entry) []byte {
	if m.cfg.Sign == nil {
		return nil
	}
	tok := m.dtok(ke).Token()
	return m.cfg.Sign(GrantInfo{Key: ke.key, Holder: m.holder(ke).Member, Req: m.req(ke), Token: tok, Epoch: tok.Epoch, Lease: m.lease(ke)})
}

// Release frees the delegation with exactly this token, from whoever sends it.
func (m *Machine) Release(now time.Time, r msg.Release) {
	ke := m.keys.Get(r.Key)
	if ke == nil || ke.deleg() == nil || (!m.dtok(ke).Is(r.Token) && !m.cfg.Mutations.releaseAnyToken()) {
		return
	}
	m.free(now, ke, true, r.Barrier)
	m.serve(now, r.Key, ke)
}

// Withdraw drops a queued request; a delegation already granted to it is
// freed too, since its holder will refuse to use it.
func (m *Machine) Withdraw(now time.Time, env msg.Envelope, w msg.Withdraw) {
	ke := m.keys.Get(w.Key)
	if ke == nil {
		return
	}
	for i, q := range ke.waiters() {
		if q.from.ID == env.From.ID && q.req == w.Req {
			m.removeWaiter(ke, i)
			break
		}
	}
	if ke.deleg() != nil && m.req(ke) == w.Req && m.holder(ke).Same(env.From) {
		m.free(now, ke, true, nil)
	}
	m.serve(now, w.Key, ke)
}

// Renew extends a delegation while the key is still ours and the holder is
// still a member (H14), waiters or not: a holder renews a recalled
// delegation only while a critical section runs on it, and that section
// keeps the lock while its holder is alive (held while alive). A refusal
// counts as a recall. Renewing a recalled delegation repeats the Recall, so
// that a lost one cannot let the holder admit new sections ahead of the
// waiters.
func (m *Machine) Renew(now time.Time, env msg.Envelope, r msg.Renew) {
	ke := m.keys.Get(r.Key)
	// A record this home handed over is no longer its to renew: the key's
	// home since may have extended it, and may end it (seed 747,749).
	if ke == nil || ke.deleg() == nil || ke.is(handedOver) || !m.dtok(ke).Is(r.Token) || !m.holder(ke).Same(env.From) {
		if m.awaitHandOver(now, env, r) {
			return
		}
		// Not ours (anymore): refuse, so the holder drains rather than trusts it.
		m.send(env.From.ID, msg.RenewReply{Key: r.Key, Token: r.Token, Attempt: r.Attempt})
		return
	}
	d := ke.deleg()
	if !m.IsHome(r.Key) || !m.holderIsMember(ke) || m.cfg.Mutations.noRenewWhileWaited() && (ke.is(recalled) || len(ke.waiters()) > 0) {
		if !ke.is(recalled) {
			ke.set(recalled, true)
			m.stats.Recalls++
		}
		m.send(env.From.ID, msg.RenewReply{Key: r.Key, Token: r.Token, Attempt: r.Attempt})
		return
	}
	if len(ke.waiters()) > 0 && !ke.is(recalled) {
		ke.set(recalled, true)
		m.stats.Recalls++
	}
	lease := r.Lease
	if lease <= 0 || lease > m.cfg.MaxLease {
		lease = m.cfg.MaxLease
	}
	if left := m.liveLeft(now); lease > left && !m.cfg.Mutations.renewPastLiveness() {
		lease = left
	}
	if lease < m.cfg.MinUseful {
		// No liveness to extend with; the holder retries and, near its
		// expiry, stops admitting.
		return
	}
	skew := m.cfg.Skew
	if m.cfg.Mutations.renewExpiryNoSkew() {
		skew = 0
	}
	if e := deadline.At(now.Add(lease + skew)); e.After(d.expires) {
		d.expires = e
	}
	m.setLease(ke, lease)
	m.send(env.From.ID, msg.RenewReply{Key: r.Key, Token: r.Token, Attempt: r.Attempt, OK: true, Lease: lease})
	if ke.is(recalled) && !ke.is(contended) {
		m.send(env.From.ID, msg.Recall{Key: r.Key, Token: r.Token})
	}
	m.timers.Add(ke, d.expires)
}
