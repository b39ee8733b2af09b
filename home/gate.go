package home

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// gateFor returns when key's activation gate in the current epoch ends, and
// the epoch K moved in from whose home a Drained could waive the last term
// (0 when no Drained can help). The restart gate is always included: waiver
// (b) never shortens it (H13).
func (m *Machine) gateFor(key string, ke *entry) (time.Time, uint64) {
	end, from := m.gateAt(key, ke, len(m.history)-1)
	return later(end, m.restartGateEnd()), from
}

// gateAt walks back from history[i] while this incarnation was key's home in
// consecutive epochs (continuity carries the gate, H4) to the epoch where key
// moved in, whose term learnedAt + EpochLease + Skew is the gate unless a
// Drained for that transition waived it.
func (m *Machine) gateAt(key string, ke *entry, i int) (time.Time, uint64) {
	lease := m.cfg.EpochLease + m.cfg.Skew
	for ; i >= 0; i-- {
		v := &m.history[i]
		if v.restored {
			// Served by an earlier incarnation, or moved in before the crash:
			// the restart gate covers both (H2).
			return time.Time{}, 0
		}
		if i > 0 && m.history[i-1].e.Number+1 == v.e.Number && m.isHomeIn(&m.history[i-1], key) {
			if m.cfg.Mutations.noGateCarry() {
				return time.Time{}, 0
			}
			continue
		}
		if v.prev == nil {
			// Moved in from epoch 0 (bootstrap): nobody ever granted it.
			return time.Time{}, 0
		}
		if m.cfg.Mutations.grantMovedAtOnce() {
			return time.Time{}, 0
		}
		if ke != nil && ke.more().drainedFor == v.e.Number {
			return time.Time{}, 0
		}
		from := uint64(0)
		// By ID: a wiped store's predecessor under its own ID cannot answer,
		// so it asks nobody and waits the whole term.
		if prevHome, ok := v.prev.Home(key); ok && prevHome.ID != m.cfg.Self.ID {
			from = v.e.Number - 1
		}
		return v.learnedAt.Add(lease), from
	}
	return time.Time{}, 0
}

// isHomeIn says whether this store was key's home in v. The store, not the
// node ID: a wiped disk rejoining under its old ID (H17, H21, H25) is a new
// member that never served the old store's keys, whose delegations may
// still run; taking the old store's epochs for its own, it carried a gate
// back to epoch 1, where nobody had granted, and granted at once.
func (m *Machine) isHomeIn(v *epochView, key string) bool {
	h, ok := v.ring.Home(key)
	if m.cfg.Mutations.continuityByNodeID() {
		return ok && h.ID == m.cfg.Self.ID
	}
	return ok && h.Same(m.cfg.Self)
}

// queryDrain asks key's home in epoch from, the epoch before key moved in,
// whether it drained key (pulled, never pushed), at most once per retry
// interval. The move need not be the current epoch's: epochs that changed
// since without moving key (continuity) leave the question the same.
func (m *Machine) queryDrain(now time.Time, key string, ke *entry, from uint64) {
	if from == 0 {
		return
	}
	_, v := m.view(from + 1)
	if v == nil || v.prev == nil {
		return
	}
	if x := ke.more(); now.Before(x.queryAt) || (!x.lastQuery.IsZero() && now.Sub(x.lastQuery) < m.cfg.RetryInterval) {
		return
	}
	prevHome, ok := v.prev.Home(key)
	if !ok {
		return
	}
	ke.edit().lastQuery = now
	m.send(prevHome.ID, msg.DrainQuery{Key: key, From: from, To: from + 1, ReceiverInc: m.cfg.Inc})
}

// movedIn is the epoch key moved in to this home in the chain of epochs it
// has served key since (continuity), when a Drained from its home in the
// epoch before could still waive that gate term; 0 otherwise (no move, a
// move from epoch 0, or waived already).
func (m *Machine) movedIn(key string, ke *entry) uint64 {
	if _, from := m.gateAt(key, ke, len(m.history)-1); from != 0 {
		return from + 1
	}
	return 0
}

// DrainQuery records a new home's question; answerQueries answers it when it
// can (held until then) and says how long otherwise.
func (m *Machine) DrainQuery(now time.Time, env msg.Envelope, q msg.DrainQuery) {
	cur := m.current()
	if cur == nil || cur.e.Number < q.To || q.From+1 != q.To {
		return // the header exchange brings whoever is behind up to date first
	}
	ke := m.entry(q.Key)
	x := ke.edit()
	for i := range x.queries {
		if x.queries[i].from == env.From.ID {
			x.queries[i].q = q
			x.queries[i].answered = time.Time{}
			m.serve(now, q.Key, ke)
			return
		}
	}
	x.queries = append(x.queries, pendingQuery{from: env.From.ID, q: q})
	m.serve(now, q.Key, ke)
}

// answerQueries sends Drained for every pending query this incarnation can
// vouch for: it served key in From with its gate passed (or its restart gate
// and reclaim stand in), it no longer grants key, and no delegation for key
// is live but one it hands over. Otherwise it sends the remaining wait once
// per query.
func (m *Machine) answerQueries(now time.Time, key string, ke *entry) {
	x := ke.extra()
	if x == nil || len(x.queries) == 0 {
		return
	}
	cur := m.current()
	kept := x.queries[:0]
	for _, p := range x.queries {
		q := p.q
		if cur == nil {
			continue
		}
		gate, ok := m.vouchGate(key, ke, q.From)
		if !ok {
			continue // we never served key in From: no Drained, the gate runs
		}
		wait := m.vouchWait(now, ke, gate)
		if wait <= 0 {
			m.stats.Drained++
			m.send(p.from, msg.Drained{Key: key, From: q.From, To: q.To, ReceiverInc: q.ReceiverInc, Barrier: ke.barrier()})
			continue
		}
		if live := m.handOver(now, ke, gate, p.from); live != nil {
			// The new home takes the running delegation over; asking again
			// (this answer lost) gets it again, with what is left then.
			if !ke.is(handedOver) {
				ke.set(handedOver, true)
				m.stats.HandedOver++
			}
			m.send(p.from, msg.Drained{Key: key, From: q.From, To: q.To, ReceiverInc: q.ReceiverInc, Barrier: ke.handOn(nil), Live: live})
			continue
		}
		if p.answered.IsZero() {
			p.answered = now
			m.send(p.from, msg.GateRemaining{Key: key, From: q.From, To: q.To, ReceiverInc: q.ReceiverInc, Remaining: wait})
		}
		m.schedule(ke, now.Add(wait))
		kept = append(kept, p)
	}
	x.queries = kept
	if len(kept) == 0 {
		x.queries = nil
	}
}

// vouchGate says whether this incarnation was key's home in epoch from, and
// if so when its own gate there (the restart gate included) passed or will.
func (m *Machine) vouchGate(key string, ke *entry, from uint64) (time.Time, bool) {
	i, v := m.view(from)
	if v == nil || !m.isHomeIn(v, key) || m.IsHome(key) {
		return time.Time{}, false
	}
	if m.cfg.Mutations.drainWhileGated() {
		return time.Time{}, true
	}
	end, _ := m.gateAt(key, ke, i)
	return later(end, m.restartGateEnd()), true
}

// vouchWait is how long until a Drained may say no delegation is live: the
// gate's end, or the live delegation's expiry (0: now).
func (m *Machine) vouchWait(now time.Time, ke *entry, gate time.Time) time.Duration {
	ready := gate
	if d := ke.deleg(); d != nil {
		if e := d.expires.Time(); e.After(ready) {
			ready = e
		}
		if !now.Before(ready) {
			ready = now.Add(m.cfg.RetryInterval) // released or expired on the next serve
		}
	}
	if !ready.After(now) {
		return 0
	}
	return ready.Sub(now)
}

// handOver returns ke's live delegation for the key's new home to take over,
// or nil when it must be waited out: the gate in the epoch it was served in
// must have passed (so it is the only delegation that can be live), the new
// home must run this protocol version (an older one would read the Drained
// without it), and the holder must be a member of the current epoch (the new
// home would refuse its renewals).
func (m *Machine) handOver(now time.Time, ke *entry, gate time.Time, to msg.NodeID) *msg.HandedOver {
	d := ke.deleg()
	cur := m.current()
	if d == nil || gate.After(now) || !deadline.At(now).Before(d.expires) || m.cfg.Mutations.noHandOver() {
		return nil
	}
	h := m.holder(ke)
	if receiver, ok := cur.e.Member(to); !ok || receiver.Version != m.cfg.Self.Version || !cur.e.Has(h.Member) {
		return nil
	}
	return &msg.HandedOver{Token: m.dtok(ke).Token(), Holder: h.Member, HolderInc: h.Inc,
		Lease: m.lease(ke), Remaining: d.expires.Time().Sub(now)}
}

// Drained waives key's move-in term when it comes from key's home in the
// previous epoch, names this incarnation, and the transition we wait on;
// anything else (stale, duplicated, for an earlier incarnation) is ignored
// (H5, H13). A Drained that hands over a live delegation makes it this
// home's: renewed while its section runs, released to here.
func (m *Machine) Drained(now time.Time, env msg.Envelope, d msg.Drained) {
	cur := m.current()
	if cur == nil || d.From+1 != d.To || d.ReceiverInc != m.cfg.Inc || !m.IsHome(d.Key) {
		return
	}
	ke := m.keys.Get(d.Key)
	// Only the move that the gate still waits on: not an earlier move of
	// the key, and nothing once waived (a repeated or late answer, whose
	// delegation may have been taken over, released and followed by our
	// own grant since).
	moved := m.movedIn(d.Key, ke)
	if moved == 0 || (d.To != moved && !(m.cfg.Mutations.acceptStaleDrained() && d.To <= cur.e.Number)) {
		return
	}
	_, v := m.view(moved)
	prevHome, ok := v.prev.Home(d.Key)
	if (!ok || prevHome.ID != env.From.ID || prevHome.Store != env.From.Store) && !m.cfg.Mutations.acceptStaleDrained() {
		return
	}
	ke = m.entry(d.Key)
	if d.Live != nil {
		m.takeOver(now, ke, d)
	}
	ke.edit().drainedFor = moved
	if d.Barrier != nil && ke.deleg() == nil {
		ke.setBytes(d.Barrier, nil)
	}
	m.serve(now, d.Key, ke)
}

// takeOver adopts the delegation an old home handed over, its lease anchored
// at receipt plus Skew (as a reclaim adopts one), unless the move-in gate
// passed meanwhile: then the activation gate has outlasted it, and this home
// may have granted the key since. A holder that is no longer a member is
// recorded all the same (serve recalls it, Renew refuses it): the Drained
// waives the gate, so the delegation must be waited out here. Like any
// adopted one it answers no request: a Grant for it would be anchored by
// its holder at an attempt of its own, past the expiry counted here (H24);
// a holder still asking (the old home's Grant is late or lost) waits behind
// it.
func (m *Machine) takeOver(now time.Time, ke *entry, d msg.Drained) {
	l := d.Live
	if gate, _ := m.gateFor(ke.key, ke); !gate.After(now) {
		return
	}
	skew := m.cfg.Skew
	if m.cfg.Mutations.takeOverNoSkew() {
		skew = 0
	}
	expires := deadline.At(now.Add(l.Remaining + skew))
	if m.cfg.Mutations.takeOverWithinLiveness() {
		if live := deadline.At(m.liveUntil); live.Before(expires) {
			expires = live
		}
	}
	if old := ke.deleg(); old != nil {
		tok := m.dtok(ke).Token()
		if tok == l.Token {
			// Ours before, handed over when the key left, back now: the
			// other home may have extended it past our record's end.
			if expires.After(old.expires) && !m.cfg.Mutations.keepOwnRecordOnHandBack() {
				old.expires = expires
				m.timers.Add(ke, expires)
			}
			ke.set(handedOver, false)
			return
		}
		if !tok.Less(l.Token) {
			return
		}
		// A record of ours that the handed-over delegation succeeded
		// (tokens only grow, and one delegation is live at a time): it is
		// over, and adopt replaces it.
	}
	lease := l.Lease
	if lease <= 0 || lease > m.cfg.MaxLease {
		lease = m.cfg.MaxLease
	}
	m.adopt(ke, peer{l.Holder, l.HolderInc}, l.Token, lease, expires, d.Barrier)
	m.stats.TakenOver++
}

// awaitHandOver answers a Renew for a delegation this home does not know:
// when the key moved in from the previous epoch and its gate still runs, the
// old home may hand it over, so ask it (DrainQuery) and let the holder renew
// again. It reports whether it asked; the caller refuses otherwise.
func (m *Machine) awaitHandOver(now time.Time, env msg.Envelope, r msg.Renew) bool {
	cur := m.current()
	if cur == nil || !m.IsHome(r.Key) || r.Token.Epoch >= cur.e.Number {
		return false
	}
	ke := m.keys.Get(r.Key)
	if ke != nil && ke.deleg() != nil && !ke.is(handedOver) {
		return false
	}
	if !cur.e.Has(env.From) || env.From.Version != m.cfg.Self.Version {
		return false
	}
	gate, from := m.gateFor(r.Key, ke)
	if !gate.After(now) || from == 0 {
		return false
	}
	ke = m.entry(r.Key)
	m.queryDrain(now, r.Key, ke, from)
	// The entry goes when nothing needs it; serve decides at the next tick.
	m.schedule(ke, now.Add(StaleWaiters*m.cfg.RetryInterval))
	return true
}

// GateRemaining postpones our next DrainQuery for key; it never shortens a gate.
func (m *Machine) GateRemaining(now time.Time, g msg.GateRemaining) {
	if g.ReceiverInc != m.cfg.Inc {
		return
	}
	ke := m.keys.Get(g.Key)
	if ke == nil || g.To != m.movedIn(g.Key, ke) {
		return
	}
	x := ke.edit()
	x.queryAt = now.Add(g.Remaining)
	x.lastQuery = time.Time{}
	m.schedule(ke, x.queryAt)
}
