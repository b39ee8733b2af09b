package clustertest

import (
	"time"
)

// scheduleFaults lays out this seed's random fault schedule over the fault
// phase, then heals everything and keeps membership whole.
func (s *Sim) scheduleFaults() {
	s.faults["drift"]++
	t := 300 * time.Millisecond
	phase := s.healedAt.Sub(simBase)
	for t < phase {
		s.at(simBase.Add(t), &event{kind: evFault, run: s.randomFault})
		t += 300*time.Millisecond + time.Duration(s.rng.Int64N(int64(1200*time.Millisecond)))
	}
	s.at(s.healedAt, &event{kind: evFault, run: s.healAll})
}

func (s *Sim) randomNode() *simNode { return s.nodes[s.rng.IntN(len(s.nodes))] }

func (s *Sim) randomFault() {
	if s.now.After(s.healedAt) {
		return
	}
	remaining := s.healedAt.Sub(s.now)
	upTo := func(d time.Duration) time.Duration {
		d = time.Duration(s.rng.Int64N(int64(d))) + 50*time.Millisecond
		return min(d, remaining)
	}
	switch s.rng.IntN(10) {
	case 0, 1: // partition: one node from the rest, both ways or one way
		n := s.randomNode()
		oneWay := s.rng.IntN(3) == 0
		kind := "partition"
		if oneWay {
			kind = "partition_oneway"
		}
		s.faults[kind]++
		s.trace("%s %s", kind, n.id)
		for _, o := range s.nodes {
			if o != n {
				s.net.cut[[2]int{n.idx, o.idx}] = true
				if !oneWay {
					s.net.cut[[2]int{o.idx, n.idx}] = true
				}
			}
		}
		s.After(upTo(3*time.Second), func() {
			for _, o := range s.nodes {
				delete(s.net.cut, [2]int{n.idx, o.idx})
				delete(s.net.cut, [2]int{o.idx, n.idx})
			}
			s.trace("heal %s", n.id)
		})
	case 2, 3: // crash and restart
		n := s.randomNode()
		s.crash(n)
		s.After(upTo(3*time.Second), func() { s.restart(n) })
	case 4: // crash, agreed down by a live member, restart (it rejoins later)
		n := s.randomNode()
		if n.core == nil {
			return
		}
		s.crash(n)
		s.After(simDownAfter, func() {
			if n.core != nil {
				return
			}
			if m := s.someLiveMember(n); m != nil && m.core != nil && !m.paused {
				s.faults["agreed_down"]++
				s.trace("agreed down %s by %s", n.id, m.id)
				m.apply(s, m.core.ProposeRemove(m.local(s.now), n.member))
			}
		})
		s.After(upTo(4*time.Second)+simDownAfter, func() { s.restart(n) })
	case 5: // pause longer than every lease, then resume
		n := s.randomNode()
		s.pause(n)
		s.After(simLease+simEpochLease+time.Duration(s.rng.Int64N(int64(time.Second))), func() { s.resume(n) })
	case 6, 7: // a lossy, duplicating, reordering network for a while
		s.faults["lossy"]++
		s.net.drop = 0.05 + s.rng.Float64()*0.15
		s.net.dup = 0.05
		s.net.slow = true
		s.After(upTo(2*time.Second), func() { s.net.drop, s.net.dup, s.net.slow = 0, 0, false })
	case 8: // a clean leave, then join again
		n := s.randomNode()
		if n.core == nil || n.paused {
			return
		}
		s.faults["leave"]++
		s.trace("leave %s", n.id)
		n.apply(s, n.core.Leave(n.local(s.now)))
	case 9: // a new node joins (up to 5)
		if len(s.nodes) >= 5 {
			return
		}
		seed := s.someLiveMember(nil)
		if seed == nil {
			return
		}
		n := s.addNode(len(s.nodes))
		s.faults["join"]++
		s.trace("join %s via %s", n.id, seed.id)
		n.start(s, nil, seed)
		for l := 0; l < s.cfg.Lockers; l++ {
			s.scheduleLock(n, s.think())
		}
	}
}

// healAll ends the fault phase: network healed, everyone up and resumed,
// and every node that is not a member asks to join again (as the root
// package does when it finds itself outside the epoch).
func (s *Sim) healAll() {
	s.trace("heal all")
	s.net.heal()
	for _, n := range s.nodes {
		s.resume(n)
		s.restart(n)
	}
	s.ensureMembers()
}

func (s *Sim) ensureMembers() {
	for _, n := range s.nodes {
		n.removed = false
		if n.core == nil {
			continue
		}
		l, ok := n.core.Current()
		if ok && l.Epoch.Has(n.member) {
			continue
		}
		n.removed = true
		if seed := s.someLiveMember(n); seed != nil {
			n.apply(s, n.core.Join(n.local(s.now), seed.member))
		}
	}
	if s.now.Before(simBase.Add(s.cfg.Duration)) {
		s.After(500*time.Millisecond, s.ensureMembers)
	}
}
