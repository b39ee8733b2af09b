package clustertest

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
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
	switch s.rng.IntN(12) {
	case 0: // partition one node from the rest, both ways or one way
		n := s.randomNode()
		oneWay := s.rng.IntN(3) == 0
		kind := "partition"
		if oneWay {
			kind = "partition_oneway"
		}
		s.faults[kind]++
		s.trace("%s %s", kind, n.id)
		s.cutOff([]*simNode{n}, oneWay)
		s.After(upTo(3*time.Second), func() { s.healLinks([]*simNode{n}) })
	case 1: // a minority cut off and agreed down by the majority, one by one:
		// epochs change in quick succession while the old homes still live.
		minority := s.minority()
		s.faults["partition_group"]++
		s.trace("partition group %v", ids(minority))
		s.cutOff(minority, false)
		s.After(s.downAfter, func() {
			// One or two majority members propose the removals, as their
			// failure detectors fire: two proposers duel for one instance.
			proposers := s.liveOutside(minority)
			if len(proposers) == 0 {
				return
			}
			for i, n := range minority {
				proposer := proposers[(i+s.rng.IntN(2))%len(proposers)]
				s.After(time.Duration(s.rng.Int64N(int64(150*time.Millisecond))), func() {
					if proposer.core == nil || proposer.paused {
						return
					}
					s.faults["agreed_down"]++
					s.trace("agreed down %s by %s", n.id, proposer.id)
					proposer.apply(s, proposer.core.ProposeRemove(proposer.local(s.now), n.member))
				})
			}
			if s.rng.IntN(2) == 0 {
				// And a new node joins right after: epochs in quick succession,
				// most keys staying where the removal moved them (H4).
				s.After(100*time.Millisecond, func() { s.joinNew(proposers[0]) })
			}
		})
		s.After(s.downAfter+upTo(3*time.Second), func() { s.healLinks(minority) })
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
		s.After(s.downAfter, func() {
			if n.core != nil {
				return
			}
			if m := s.someLiveMember(n); m != nil && m.core != nil && !m.paused {
				s.faults["agreed_down"]++
				s.trace("agreed down %s by %s", n.id, m.id)
				m.apply(s, m.core.ProposeRemove(m.local(s.now), n.member))
			}
		})
		s.After(upTo(4*time.Second)+s.downAfter, func() { s.restart(n) })
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
	case 9: // a new node joins
		s.joinNew(s.someLiveMember(nil))
	case 11: // a rolling upgrade to the next protocol version, one node at a
		// time: cluster locks must fail closed from the first upgraded node
		// until the epoch carries the new version everywhere
		if s.version != 1 {
			return
		}
		s.version = 2
		s.faults["rolling_upgrade"]++
		s.trace("rolling upgrade to v%d", s.version)
		gap := 100*time.Millisecond + time.Duration(s.rng.Int64N(int64(700*time.Millisecond)))
		for i, n := range s.nodes {
			s.After(time.Duration(i)*gap, func() { s.upgrade(n) })
		}
	case 10: // two members propose different epochs for one instance at once,
		// over a slow, reordering network: the duel that only a durable
		// promise and acceptance keep from choosing twice
		live := s.liveOutside(nil)
		if len(live) < 3 {
			return
		}
		s.faults["proposal_duel"]++
		s.net.slow = true
		p := s.rng.Perm(len(live))
		a, b, victimA, victimB := live[p[0]], live[p[1]], live[p[2]], live[p[1]]
		if len(live) > 3 {
			victimB = live[p[3]]
		}
		s.trace("duel %s removes %s, %s removes %s", a.id, victimA.id, b.id, victimB.id)
		a.apply(s, a.core.ProposeRemove(a.local(s.now), victimA.member))
		b.apply(s, b.core.ProposeRemove(b.local(s.now), victimB.member))
		s.After(upTo(2*time.Second), func() { s.net.slow = false })
	}
}

// joinNew adds a node that joins through seed (at most 6 nodes in all).
func (s *Sim) joinNew(seed *simNode) {
	if len(s.nodes) >= 6 || seed == nil || seed.core == nil {
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

func (s *Sim) liveOutside(group []*simNode) []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.core != nil && !n.paused && !slices.Contains(group, n) {
			out = append(out, n)
		}
	}
	return out
}

// upgrade restarts n running the cluster's target version; it joins again
// so that the epoch carries its new version.
func (s *Sim) upgrade(n *simNode) {
	if n.member.Version == s.version {
		return
	}
	s.crash(n)
	n.member.Version = s.version
	s.trace("upgraded %s to v%d", n.id, s.version)
	s.restart(n)
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
		s.upgrade(n)
	}
	s.ensureMembers()
}

func (s *Sim) ensureMembers() {
	for _, n := range s.nodes {
		n.removed = false
		if n.core == nil {
			continue
		}
		if !n.core.NeedsJoin() {
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

func (s *Sim) cutOff(group []*simNode, oneWay bool) {
	in := map[int]bool{}
	for _, n := range group {
		in[n.idx] = true
	}
	for _, a := range group {
		for _, b := range s.nodes {
			if !in[b.idx] {
				s.net.cut[[2]int{a.idx, b.idx}] = true
				if !oneWay {
					s.net.cut[[2]int{b.idx, a.idx}] = true
				}
			}
		}
	}
}

func (s *Sim) healLinks(group []*simNode) {
	for _, a := range group {
		for _, b := range s.nodes {
			delete(s.net.cut, [2]int{a.idx, b.idx})
			delete(s.net.cut, [2]int{b.idx, a.idx})
		}
	}
	s.trace("heal %v", ids(group))
}

// minority picks up to (N−1)/2 nodes, at least one.
func (s *Sim) minority() []*simNode {
	k := 1 + s.rng.IntN(max(1, (len(s.nodes)-1)/2))
	perm := s.rng.Perm(len(s.nodes))
	out := make([]*simNode, 0, k)
	for _, i := range perm[:k] {
		out = append(out, s.nodes[i])
	}
	return out
}

func ids(ns []*simNode) []msg.NodeID {
	out := make([]msg.NodeID, len(ns))
	for i, n := range ns {
		out[i] = n.id
	}
	return out
}
