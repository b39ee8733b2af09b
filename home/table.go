package home

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// entry is the home's state for one key, kept only while needed: a live
// delegation, waiters, a gate or drain in progress, or a barrier to hand on.
type entry struct {
	key string
	// pos is the key's place in Machine.timers.
	pos uint32
	// D1: at most one live delegation per key.
	deleg   *delegation
	waiters []*waiter
	// barrier is the newest released (or drained-in) barrier, handed to the
	// next grant (successor freshness).
	barrier []byte
	// drainedFor is the epoch whose move-in gate term a valid Drained waived.
	drainedFor uint64
	// queries are DrainQueries from K's new home that we still owe an answer.
	queries []pendingQuery
	// lastQuery is when this node (as gated new home) last sent a DrainQuery.
	lastQuery time.Time
	queryAt   time.Time // do not re-query before (GateRemaining)
	idleSince time.Time
}

// delegation is a live delegation as the home sees it. Its expiry runs on the
// home's own, longer clock: anchored at the grant (or renewal receipt) and
// lengthened by Skew, so the holder always expires first.
type delegation struct {
	holder    msg.Member
	holderInc uint64
	req       msg.RequestID
	attempt   uint32 // the attempt the Grant echoed; a re-sent Grant echoes it again (H6)
	token     fence.Token
	lease     time.Duration
	expires   time.Time
	recalled  bool
	contended bool
	barrier   []byte // inherited barrier given with the grant
	signed    []byte
	// waitedSince is when the granted request joined the queue; checkers
	// compare it with the waiters still queued (FIFO).
	waitedSince time.Time
}

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
func (ke *entry) removeWaiter(i int) {
	n := copy(ke.waiters[i:], ke.waiters[i+1:])
	ke.waiters[i+n] = nil
	ke.waiters = ke.waiters[:i+n]
	if len(ke.waiters) == 0 {
		ke.waiters = nil
	}
}

// idleKeep is how long a free entry keeps its barrier for a later holder.
func (m *Machine) idleKeep() time.Duration { return 10 * m.cfg.MaxLease }

func (m *Machine) entry(key string) *entry {
	ke := m.keys[key]
	if ke == nil {
		ke = &entry{key: key}
		m.keys[key] = ke
	}
	return ke
}

// free ends key's delegation. released says the holder gave it back (with
// barrier, nil meaning "keep the inherited one", H18).
func (m *Machine) free(now time.Time, ke *entry, released bool, barrier []byte) {
	d := ke.deleg
	if d == nil {
		return
	}
	if barrier != nil {
		ke.barrier = barrier
	} else if d.barrier != nil {
		ke.barrier = d.barrier
	}
	if released {
		m.stats.Releases++
		if len(ke.waiters) > 0 {
			m.stats.Handoffs++
		}
	} else {
		m.stats.ExpiredHolds++
	}
	ke.deleg = nil
	ke.idleSince = now
	m.live--
	if m.byHold[d.holder.ID]--; m.byHold[d.holder.ID] <= 0 {
		delete(m.byHold, d.holder.ID)
	}
}

// gc forgets an entry that carries nothing anymore.
func (m *Machine) gc(now time.Time, key string, ke *entry) {
	if ke.deleg != nil || len(ke.waiters) > 0 || len(ke.queries) > 0 {
		return
	}
	if ke.barrier != nil && now.Sub(ke.idleSince) < m.idleKeep() {
		m.schedule(ke, ke.idleSince.Add(m.idleKeep()))
		return
	}
	if ke.drainedFor != 0 {
		if cur := m.current(); cur != nil && cur.e.Number == ke.drainedFor && m.IsHome(key) {
			// The waiver must outlive an idle period: the key has no entry to
			// recompute it from otherwise. It is tiny; keep it for the epoch.
			return
		}
	}
	delete(m.keys, key)
	delete(m.needLiveness, key)
	m.timers.Remove(ke)
}
