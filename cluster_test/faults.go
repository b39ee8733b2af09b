package clustertest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// scheduleFaults lays out this seed's random fault schedule over the fault
// phase, then heals everything and keeps membership whole.
func (s *Sim) scheduleFaults() {
	s.faults["drift"]++
	s.harsh.keep = s.rng.IntN(2) == 0
	s.harsh.holdFrom = map[int]time.Time{}
	if s.harsh.boundaries = s.rng.IntN(2) == 0; s.harsh.boundaries {
		s.faults["boundary_seed"]++
	}
	s.startGuard()
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
	kinds := 14 + harshKinds
	if s.cfg.Wipes {
		kinds++ // only then: a draw more would change every schedule
	}
	k := s.rng.IntN(kinds)
	if k == 14+harshKinds {
		s.wipeFault()
		return
	}
	if k >= 14 {
		s.harshFault(k-14, upTo)
		return
	}
	switch k {
	case 0: // partition one node from the rest, both ways or one way
		n := s.randomNode()
		s.budget(2)
		oneWay := s.rng.IntN(3) == 0
		kind := "partition"
		if oneWay {
			kind = "partition_oneway"
		}
		s.faults[kind]++
		s.trace("%s %s", kind, n.id)
		s.cutOff([]*simNode{n}, oneWay)
		s.After(upTo(3*time.Second), func() { s.healLinks([]*simNode{n}) })
	case 1: // a minority cut off and agreed down by the majority's failure
		// detectors, one by one: epochs change in quick succession while the
		// old homes still live; two majority members may propose at once.
		minority := s.minority()
		s.faults["partition_group"]++
		s.budget(2 * len(minority))
		s.trace("partition group %v", ids(minority))
		s.cutOff(minority, false)
		if s.rng.IntN(2) == 0 {
			// And a new node joins right after the removals: epochs in quick
			// succession, most keys staying where the removal moved them (H4).
			s.After(s.downAfter+deadAfter+300*time.Millisecond, func() {
				if p := s.liveOutside(minority); len(p) > 0 && s.now.Before(s.healedAt) {
					s.joinNew(p[0])
				}
			})
		}
		s.After(s.downAfter+deadAfter+upTo(3*time.Second), func() { s.healLinks(minority) })
	case 2, 3: // crash and restart
		n := s.randomNode()
		s.budget(2)
		s.crash(n)
		s.maybeMove(n)
		s.After(upTo(3*time.Second), func() { s.restart(n) })
	case 4: // crash, down long enough to be agreed down, restart: it asks
		// to join again once its restart gate passed
		n := s.randomNode()
		s.budget(2)
		s.crash(n)
		s.maybeMove(n)
		s.After(upTo(4*time.Second)+s.downAfter+deadAfter, func() { s.restart(n) })
	case 5: // pause longer than every lease, then resume; or just past one
		// lease, which failure detection may not notice: the grants that
		// waited meanwhile arrive late, and nothing else changes
		n := s.randomNode()
		s.budget(2)
		s.pause(n)
		d := simLease + simEpochLease + time.Duration(s.rng.Int64N(int64(time.Second)))
		if s.rng.IntN(2) == 0 {
			s.faults["pause_short"]++
			d = simLease + simSkew + time.Duration(s.rng.Int64N(int64(s.downAfter)))
		}
		s.After(d, func() { s.resume(n) })
	case 6, 7: // a lossy, duplicating, reordering network for a while
		s.faults["lossy"]++
		s.net.Drop = 0.05 + s.rng.Float64()*0.15
		s.net.Dup = 0.05
		s.slowNet(true)
		s.After(upTo(2*time.Second), func() { s.net.Drop, s.net.Dup = 0, 0; s.slowNet(false) })
	case 8: // a clean leave, then Join again a while later
		n := s.randomNode()
		if h := s.homeUnderSection(); h != nil && s.rng.IntN(2) == 0 {
			// Leave under a running section: its delegation moves to the
			// key's new home.
			n = h
			s.faults["leave_under_section"]++
			s.trace("leave under a running section: %s", n.id)
		}
		if !n.up() || n.closing {
			return // Node.Leave is refused once Close began
		}
		if s.rng.IntN(2) == 0 {
			s.closeThenRestart(n, upTo(3*time.Second))
			return
		}
		s.faults["leave"]++
		s.leaveThenJoin(n, upTo(3*time.Second))
	case 9: // a new node joins
		s.joinNew(s.someLiveMember(nil))
	case 12: // a member's gossip goes dark for longer than DownAfter while
		// its transport still works: memberlist calls it dead, the others
		// remove it; when gossip comes back it joins again
		n := s.randomNode()
		s.faults["gossip_blackout"]++
		s.budget(2)
		s.trace("gossip blackout %s", n.id)
		s.blackout[n.idx] = true
		s.After(s.downAfter+deadAfter+upTo(3*time.Second), func() {
			s.trace("gossip back %s", n.id)
			delete(s.blackout, n.idx)
		})
	case 13: // repeated short partitions of one node
		n := s.randomNode()
		s.faults["partition_repeated"]++
		at := time.Duration(0)
		for range 2 + s.rng.IntN(3) {
			s.budget(2)
			on, off := upTo(s.downAfter+deadAfter+time.Second), upTo(time.Second)
			s.After(at, func() {
				if s.now.Before(s.healedAt) {
					s.trace("partition %s", n.id)
					s.cutOff([]*simNode{n}, false)
				}
			})
			s.After(at+on, func() { s.healLinks([]*simNode{n}) })
			at += on + off
		}
	case 11: // a rolling upgrade to the next protocol version, one node at a
		// time: cluster locks must fail closed from the first upgraded node
		// until the epoch carries the new version everywhere
		if s.version != 1 {
			return
		}
		s.version = 2
		s.faults["rolling_upgrade"]++
		s.budget(2 * len(s.nodes))
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
		s.budget(4) // two forced removals and their joins
		s.slowNet(true)
		p := s.rng.Perm(len(live))
		a, b, victimA, victimB := live[p[0]], live[p[1]], live[p[2]], live[p[1]]
		if len(live) > 3 {
			victimB = live[p[3]]
		}
		s.trace("duel %s removes %s, %s removes %s", a.id, victimA.id, b.id, victimB.id)
		a.apply(s, a.core.ProposeRemove(a.local(s.now), victimA.member))
		b.apply(s, b.core.ProposeRemove(b.local(s.now), victimB.member))
		s.After(upTo(2*time.Second), func() { s.slowNet(false) })
	}
}

// wipeFault (SimConfig.Wipes): a node crashes and starts again on an empty
// disk under its old node ID, at once or after the others may have agreed
// it down. Whatever it homed or held is the new store's to learn from
// scratch: it must wait out its gate before it grants (H25), and the
// members must let it in though its incarnations start low again (H27).
//
// As docs/operations.md asks of an operator, it wipes only a whole
// cluster (every node a member of one epoch, lockable: what the healing
// check asks) whose epoch has three members or more: the wiped store's
// old entry is gone for good, and the epoch that lets the new one in needs
// a majority of the current one. A wipe of one of two members, or while
// another store is still missing, would leave no majority ever again,
// which no protocol heals (seed 28 of the first wipe runs: an epoch of
// n1 and a wiped n2).
//
// A cluster that is not whole now is asked again every half second while
// the faults last, so that a busy schedule still wipes.
func (s *Sim) wipeFault() {
	if !s.now.Before(s.healedAt) {
		return
	}
	n := s.randomNode()
	if n.gone || n.closing {
		return
	}
	if !s.wholeWith(n) {
		s.After(500*time.Millisecond, s.wipeFault)
		return
	}
	s.budget(2)
	s.crash(n)
	s.wipe(n, s.rng.Uint64()|1)
	d := min(time.Duration(s.rng.Int64N(int64(3*time.Second)))+50*time.Millisecond, s.healedAt.Sub(s.now))
	if s.rng.IntN(2) == 0 {
		d += s.downAfter + deadAfter
	}
	s.After(d, func() { s.restart(n) })
}

// wholeWith: membership is whole now (every node a member of one epoch,
// lockable), and n is in that epoch of three members or more.
func (s *Sim) wholeWith(n *simNode) bool {
	if n.core == nil || s.unhealed() != "" {
		return false
	}
	l, ok := n.core.Current()
	return ok && len(l.Epoch.Members) >= 3
}

// joinNew adds a node that joins through seed's gossip address (at most 6
// nodes in all, or one more than the initial members in a larger cluster).
// homeUnderSection returns the home of a key whose long section another
// node runs now, in that node's view, or nil.
func (s *Sim) homeUnderSection() *simNode {
	for _, n := range s.nodes {
		if !n.up() || n.disk.Learned() == nil {
			continue
		}
		ring := epoch.NewRing(n.disk.Learned().Epoch)
		for _, id := range slices.Sorted(maps.Keys(n.lockers)) {
			cs := n.lockers[id]
			if !cs.long || !cs.admitted || cs.closed {
				continue
			}
			if h, ok := ring.Home(cs.key); ok && h.ID != n.member.ID {
				return s.Node(string(h.ID))
			}
		}
	}
	return nil
}

// leaveThenJoin has n leave cleanly now and ask to join again after d.
func (s *Sim) leaveThenJoin(n *simNode, d time.Duration) {
	s.budget(2)
	s.trace("leave %s", n.id)
	n.apply(s, n.core.Leave(n.local(s.now), false))
	gen := n.gen
	var again func()
	again = func() {
		switch {
		case n.gen != gen: // restarted: the new process joins on its own
		case n.closing: // Close began since: the process ends, its restart joins
		case !n.up():
			s.After(100*time.Millisecond, again)
		default:
			s.trace("join again %s", n.id)
			n.core.WantJoin()
		}
	}
	s.After(d, again)
}

func (s *Sim) joinNew(seed *simNode) {
	if len(s.nodes) >= max(6, s.cfg.Nodes+1) || seed == nil || !seed.up() {
		return
	}
	n := s.addNode(len(s.nodes))
	s.faults["join"]++
	s.budget(1)
	s.trace("join %s via %s", n.id, seed.id)
	n.seeds = []string{seedName(seed)}
	n.start(s, nil)
	s.scheduleLockers(n)
}

func (s *Sim) liveOutside(group []*simNode) []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.up() && !slices.Contains(group, n) {
			out = append(out, n)
		}
	}
	return out
}

// upgrade restarts n running the cluster's target version; it joins again
// so that the epoch carries its new version.
func (s *Sim) upgrade(n *simNode) {
	if n.member.Version == s.version || n.gone {
		return
	}
	s.crash(n)
	n.member.Version = s.version
	s.trace("upgraded %s to v%d", n.id, s.version)
	s.restart(n)
}

// healAll ends the fault phase: network and gossip healed, everyone up and
// resumed. Membership heals by itself from here (the core's rejoins).
func (s *Sim) healAll() {
	s.trace("heal all")
	s.check.healing()
	s.net.Heal()
	clear(s.blackout)
	for _, n := range s.nodes {
		if n.closing {
			s.trace("close %s ends: killed at heal", n.id)
			s.crash(n)
		}
		s.resume(n)
		s.restart(n)
		s.upgrade(n)
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
				s.net.Cut(a.idx, b.idx)
				if !oneWay {
					s.net.Cut(b.idx, a.idx)
				}
			}
		}
	}
}

func (s *Sim) healLinks(group []*simNode) {
	for _, a := range group {
		for _, b := range s.nodes {
			s.net.Mend(a.idx, b.idx)
			s.net.Mend(b.idx, a.idx)
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

// maybeMove gives a crashed node, one time in three, another transport and
// gossip address for its restart, as a rescheduled pod gets a new IP: what
// it sent before is still addressed to the old one, where nothing answers,
// and it must be reached at the new one once it asks to rejoin (it keeps
// its store, so it keeps its keys: one epoch updates its entry).
func (s *Sim) maybeMove(n *simNode) {
	if s.rng.IntN(3) != 0 {
		return
	}
	s.faults["restart_moved"]++
	s.budget(1)
	n.moves++
	n.member.Addr = fmt.Sprintf("%s.%d", n.id, n.moves)
	s.trace("move %s to %s", n.id, n.member.Addr)
}

// simCloseBound is Close's deadline under `homelock node`'s SIGTERM
// (10s + MaxLease + EpochLease + Skew): past it the process ends anyway.
const simCloseBound = 10*time.Second + simLease + simEpochLease + simSkew

// closeThenRestart is a SIGTERM to `homelock node`, the rolling restart the
// README shows: Node.Close's steps in its order, each decided by the core's
// own answers (Relinquish, HandedOff, HandOffBlocker and the guarded Leave,
// LingerUntil), then the process ends and a new one starts after d and joins
// again. A crash or healAll meanwhile ends the close as a kill would.
func (s *Sim) closeThenRestart(n *simNode, d time.Duration) {
	if n.core == nil || n.paused || n.closing {
		return
	}
	s.faults["close"]++
	s.budget(2)
	s.trace("close %s", n.id)
	n.closing = true
	gen, begin := n.gen, s.now
	// Lockers still waiting fail with ErrClosed; held keys are drained and
	// released, as a Recall would.
	for _, l := range deadline.SortedKeys(n.lockers) {
		if cs := n.lockers[l]; !cs.admitted {
			s.cancelLocker(n, cs)
		}
	}
	now := n.local(s.now)
	for _, key := range n.core.Holder().HeldKeys() {
		n.apply(s, n.core.Relinquish(now, key))
	}
	end := func(why string) {
		s.trace("close %s ends: %s", n.id, why)
		s.crash(n) // the process exits: what it kept in memory is gone
		s.After(d, func() { s.restart(n) })
	}
	phase, polls := "drain", 0
	var step func()
	step = func() {
		switch {
		case n.gen != gen || n.core == nil:
			return // killed meanwhile: the kill's restart follows
		case n.paused:
			s.After(simRetry, step)
			return
		case s.now.Sub(begin) > simCloseBound:
			end("deadline, in phase " + phase)
			return
		}
		now := n.local(s.now)
		polls++
		switch phase {
		case "drain": // waitDrained
			if _, ds := n.core.Stats(); ds.Held > 0 {
				break
			}
			if !n.core.LeftAt().IsZero() {
				phase = "linger" // a Leave before it did the handoff
				break
			}
			if why := n.core.HandOffBlocker(); why != "" {
				end("not handing home keys off: " + why)
				return
			}
			phase, polls = "leave", 0
			n.apply(s, n.core.Leave(now, true))
		case "leave": // handOff: until an epoch without this node is learned
			l, ok := n.core.Current()
			if ok && l.Epoch.Number >= 1 && !l.Epoch.Has(n.member) {
				phase = "handoff"
				break
			}
			if ok && l.Epoch.Number >= 1 && len(l.Epoch.Members) == 1 {
				end("the only member")
				return
			}
			// Close asks the blocker every ten retry intervals.
			if polls%10 == 0 {
				if why := n.core.HandOffBlocker(); why != "" {
					end("handoff stopped: " + why)
					return
				}
			}
		case "handoff": // until nothing is granted by or held at this node
			if n.core.HandedOff() {
				phase = "linger"
			}
		case "linger": // the new homes pull Drained from it meanwhile
			if !now.Before(n.core.LingerUntil()) {
				s.faults["close_handed_off"]++
				end("handed off")
				return
			}
		}
		s.After(simRetry, step)
	}
	s.After(simRetry, step)
}

// scheduleLockers gives a node its workload's lockers, as a new or
// restarted process gets its clients back.
func (s *Sim) scheduleLockers(n *simNode) {
	for l := 0; l < s.cfg.Lockers; l++ {
		s.scheduleLock(n, s.think())
	}
}
