package clustertest

import (
	"time"

	"github.com/homelock/homelock/msg"
)

// Script helpers: fixed schedules drive the same simulator by node ID.

// Node returns the node with id (nil if none).
func (s *Sim) Node(id string) *simNode { return s.nodeByID(msg.NodeID(id)) }

// Crash crashes node id now; Restart starts it again.
func (s *Sim) Crash(id string)   { s.crash(s.Node(id)) }
func (s *Sim) Restart(id string) { s.restart(s.Node(id)) }

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
	s.net.cut[[2]int{x.idx, y.idx}] = true
	s.net.cut[[2]int{y.idx, x.idx}] = true
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
