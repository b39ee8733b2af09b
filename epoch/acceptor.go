package epoch

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
)

// The acceptor side of instance n+1 (the instance choosing epoch n+1).
//
// Only a member (ID and store, H17) of the learned epoch n accepts for
// instance n+1: a node with no durable learned epoch, or whose store is not
// in it, has no acceptor record it could trust. Every promise and acceptance
// is returned in Output.Acceptor in the same step as the reply that depends
// on it, and the driver syncs it first (docs/design.md: an acceptor that forgot an
// acceptance lets two epochs live at once, breaking E1).

// acceptorFor reports whether this node accepts for instance i.
func (m *Machine) acceptorFor(i uint64) bool {
	return m.learned != nil && m.learned.Epoch.Number+1 == i && m.selfMember()
}

// sameEpochN refuses proposals made in a different epoch n than ours. Under
// E1 that only happens at bootstrap, with a different initial list: such a
// node refuses to join.
func (m *Machine) sameEpochN(env msg.Envelope, instance uint64) bool {
	return env.Epoch+1 == instance && env.Digest == m.learnedDigest()
}

func (m *Machine) onPrepare(now time.Time, env msg.Envelope, p msg.Prepare) {
	if m.learned != nil && m.learned.Epoch.Number >= p.Instance {
		m.sendLearn(env.From.ID) // decided: teach the proposer instead
		return
	}
	if !m.acceptorFor(p.Instance) || !m.sameEpochN(env, p.Instance) {
		return
	}
	r := m.record(p.Instance)
	if p.Ballot.Compare(r.Promised) <= 0 {
		m.send(env.From.ID, msg.Promise{Instance: p.Instance, Ballot: p.Ballot, Promised: r.Promised})
		return
	}
	r.Promised = p.Ballot
	m.maxCounter = max(m.maxCounter, p.Ballot.Counter)
	m.acc[p.Instance] = r
	if !testSkipPersistPromise {
		m.persist(r)
	}
	reply := msg.Promise{Instance: p.Instance, Ballot: p.Ballot, OK: true, Promised: r.Promised, Accepted: r.Accepted}
	if r.Value != nil {
		v := r.Value.Clone()
		reply.Value = &v
	}
	m.send(env.From.ID, reply)
	m.noteStray(now) // H16: our own promise for n+1
}

func (m *Machine) onAccept(now time.Time, env msg.Envelope, a msg.Accept) {
	if m.learned != nil && m.learned.Epoch.Number >= a.Instance {
		m.sendLearn(env.From.ID)
		return
	}
	if !m.acceptorFor(a.Instance) || !m.sameEpochN(env, a.Instance) {
		return
	}
	if validValue(a.Value, m.learned.Epoch) != nil {
		return // e.g. epoch 1 with other members than our epoch 0
	}
	r := m.record(a.Instance)
	if a.Ballot.Compare(r.Promised) < 0 && !m.cfg.Mutations.acceptBelowPromise() {
		m.send(env.From.ID, msg.Accepted{Instance: a.Instance, Ballot: a.Ballot, Promised: r.Promised})
		return
	}
	// An Accept counts as a promise.
	v := a.Value.Clone()
	r.Promised, r.Accepted, r.Value = a.Ballot, a.Ballot, &v
	m.maxCounter = max(m.maxCounter, a.Ballot.Counter)
	m.acc[a.Instance] = r
	if !testSkipPersistAccept {
		m.persist(r)
	}
	m.send(env.From.ID, msg.Accepted{Instance: a.Instance, Ballot: a.Ballot, OK: true, Promised: r.Promised})
	m.noteStray(now)
}

func (m *Machine) record(i uint64) AcceptorRecord {
	r, ok := m.acc[i]
	if !ok {
		r.Instance = i
	}
	return r
}

// persist hands a record to the driver; finish keeps the last per instance.
func (m *Machine) persist(r AcceptorRecord) {
	m.out.Acceptor = append(m.out.Acceptor, cloneRecord(r))
}

// promisedAbove returns the highest instance above n this acceptor promised
// (0 when none). Only n+1 can exist, but the rule is stated for "any".
func (m *Machine) promisedAbove(n uint64) uint64 {
	var hi uint64
	for i, r := range m.acc {
		if i > n && !r.Promised.IsZero() && i > hi {
			hi = i
		}
	}
	return hi
}

// validValue checks that v may be accepted or learned as the epoch after
// prev: numbered prev+1, members sorted by unique node ID, and for epoch 1
// exactly the initial members (a node given another initial list refuses).
func validValue(v msg.Epoch, prev msg.Epoch) error {
	if v.Number != prev.Number+1 {
		return errCertNumber
	}
	for i := 1; i < len(v.Members); i++ {
		if v.Members[i-1].ID >= v.Members[i].ID {
			return errEpochShape
		}
	}
	if v.Number == 1 && (!slices.Equal(v.Members, prev.Members) || v.Caps != prev.Caps) {
		return errEpochOne
	}
	return nil
}
