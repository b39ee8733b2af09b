package clustertest

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// Script helpers: fixed schedules drive the same simulator by node ID.

// Node returns the node with id (nil if none).
func (s *Sim) Node(id string) *simNode { return s.nodeByID(msg.NodeID(id)) }

// Crash crashes node id now; Restart starts it again.
func (s *Sim) Crash(id string)   { s.crash(s.Node(id)) }
func (s *Sim) Restart(id string) { s.restart(s.Node(id)) }

// Pause stops node id's process without killing it (a GC pause or a
// suspended VM): it neither renews nor releases; Resume continues it.
func (s *Sim) Pause(id string) {
	s.budget(2) // it may be seen down: its removal, and its join
	s.pause(s.Node(id))
}
func (s *Sim) Resume(id string) { s.resume(s.Node(id)) }

// ProposeRemove has node by propose an epoch without victim.
func (s *Sim) ProposeRemove(by, victim string) {
	p, v := s.Node(by), s.Node(victim)
	if p.core == nil {
		return
	}
	s.budget(2) // the removal, and the victim's join
	p.apply(s, p.core.ProposeRemove(p.local(s.now), v.member))
}

// Cut blocks messages between a and b both ways until Heal or the heal.
func (s *Sim) Cut(a, b string) {
	x, y := s.Node(a), s.Node(b)
	s.budget(4) // each may see the other down: two removals, two joins
	s.net.Cut(x.idx, y.idx)
	s.net.Cut(y.idx, x.idx)
}

// Mend undoes Cut.
func (s *Sim) Mend(a, b string) {
	x, y := s.Node(a), s.Node(b)
	s.net.Mend(x.idx, y.idx)
	s.net.Mend(y.idx, x.idx)
}

// forgottenAcceptance is the forgetful-acceptor counterexample (docs/design.md). n1 proposes an epoch
// without n3 and gets it chosen through n2's acceptance; n1's Learn never
// reaches n2, which then crashes and restarts; n3, cut off from n1, proposes
// an epoch without n1 through n2. An acceptor that persisted its acceptance
// reports it, n3 adopts n1's value, and one epoch is chosen; one that forgot
// it lets epoch 2 be chosen twice (E1).
func forgottenAcceptance(s *Sim) {
	s.Cut("n1", "n3")
	s.After(500*time.Millisecond, func() { s.ProposeRemove("n1", "n3") })
	s.After(600*time.Millisecond, func() { s.Crash("n2") })
	s.After(700*time.Millisecond, func() { s.Restart("n2") })
	s.After(800*time.Millisecond, func() { s.ProposeRemove("n3", "n1") })
}

// noLearnFromN1ToN2 keeps n2 from learning n1's epoch before it crashes.
func noLearnFromN1ToN2(from, to msg.NodeID, env msg.Envelope) bool {
	l, learn := env.Body.(msg.Learn)
	return !(learn && l.Epoch.Number >= 2 && from == "n1" && to == "n2")
}

// scripted returns the default configuration of seed running script with
// filter on three nodes.
func scripted(seed uint64, script func(*Sim), filter func(from, to msg.NodeID, env msg.Envelope) bool) SimConfig {
	cfg := DefaultSimConfig(seed)
	cfg.Nodes = 3
	cfg.Script, cfg.Filter = script, filter
	return cfg
}

// lostHigherValue is the wrong-value-adopted counterexample: n1 proposes an
// epoch without n3 whose Accept reaches only its own acceptor; cut off, n1
// cannot hear n2 choose an epoch without n1 through n2 and n3, and no Learn
// of it leaves n2. Back, n1 retries with a higher ballot and gets promises
// from itself (reporting its own value, accepted under the lower ballot)
// and from n3 (reporting n2's chosen value under the higher ballot); n2 only
// teaches it the epoch, which the filter drops. A proposer that adopts the
// value of the highest ballot re-proposes n2's epoch; one that adopts the
// first value reported chooses its own, and epoch 2 forks (E1).
func lostHigherValue(s *Sim) {
	phase := 0
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		if l, ok := env.Body.(msg.Learn); ok && l.Epoch.Number >= 2 && from == "n2" {
			return false
		}
		switch phase {
		case 1:
			_, accept := env.Body.(msg.Accept)
			return !(accept && from == "n1")
		case 2:
			return from != "n1" && to != "n1"
		}
		return true
	}
	s.After(500*time.Millisecond, func() {
		phase = 1
		s.ProposeRemove("n1", "n3")
	})
	s.After(510*time.Millisecond, func() {
		phase = 2
		s.ProposeRemove("n2", "n1")
	})
	s.After(700*time.Millisecond, func() { phase = 3 })
}

// CancelLocks has node id give up every locker waiting for key, as a locker
// whose context ends does.
func (s *Sim) CancelLocks(id, key string) {
	n := s.Node(id)
	if n == nil || n.core == nil || n.paused {
		return
	}
	for _, l := range deadline.SortedKeys(n.lockers) {
		cs := n.lockers[l]
		if cs.key == key && !cs.admitted {
			s.cancelLocker(n, cs)
		}
	}
}

// cancelLocker withdraws a locker still waiting, as a Lock whose context
// ended (or whose node closes) does: it is resolved, and the home hears
// that it no longer waits.
func (s *Sim) cancelLocker(n *simNode, cs *critical) {
	cs.resolved = true
	s.check.closeCS(cs)
	delete(n.lockers, cs.locker)
	n.apply(s, n.core.Cancel(n.local(s.now), cs.key, cs.locker))
}
