package clustertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// Harsher, targeted faults: each aims at one rule that the broad random
// faults of faults.go reach only by luck. randomFault draws them beside
// the others; each one counts itself in Result.Faults.
//
//   - drift_bound: every clock runs at one of two rates whose ratio is
//     exactly the configured bound (1/(1−MaxDrift)), fast and slow nodes
//     both, instead of a random rate within it;
//   - clock_jump: a suspend the lease clock misses (it stops, wall time
//     does not); on resume the driver reads its clocks before anything
//     else runs, and the core finds wall time ahead by more than JumpAfter;
//   - clock_stall_short: in half of those draws instead, two to four such
//     suspends of 20 to 140 ms, each under JumpAfter alone and often over
//     it together (the core must add them up, H9), or not (the lag goes
//     unseen, and Skew must cover it);
//   - suspend: a suspend the lease clock counts; on resume the messages
//     that waited are handled before the first timer tick;
//   - delay_seconds: one message in eight held for up to seconds;
//   - old_replay: a node restarts, and messages its previous process sent
//     and messages sent to it before the crash arrive after the restart,
//     reordered and some twice;
//   - gate_epochs: epoch changes in quick succession while restart and
//     activation gates run;
//   - minority_busy: a cut-off minority keeps locking the keys it homes
//     until its liveness must have ended, while the majority contends for
//     them;
//   - boundary_acquire: acquires timed at the instants a Grant's lease ends
//     on its holder's and on its home's clock, and at liveness ends.
type harsh struct {
	driftSet   bool
	driftBound bool
	fastNext   bool
	// old keeps, per node, the last messages it sent and the last sent to
	// it (only in seeds that replay them).
	keep       bool
	sentBy     []*oldRing // by node index
	sentTo     []*oldRing
	boundaries bool
	detained   []*detainedMsg
	holdFrom   map[int]time.Time // detain all a node sends until then
	// guard is the guarded store, in one seed in guardEvery (guardsim.go).
	guard *guardStore
}

type oldMsg struct {
	to  int
	env msg.Envelope
}

type detainedMsg struct {
	oldMsg
	from int
	done bool
}

func (s *Sim) releaseDetained(d *detainedMsg) {
	if d.done {
		return
	}
	d.done = true
	s.faults["detained"]++
	s.deliverOld(d.oldMsg)
}

const oldKept = 24

// oldRing is a node's last oldKept messages sent (or received): a ring,
// since keeping one more by shifting the others copied two dozen
// envelopes per message sent.
type oldRing struct {
	msgs [oldKept]oldMsg
	// next is where the next message goes; n counts those kept.
	next, n int
}

func (r *oldRing) add(m oldMsg) {
	r.msgs[r.next] = m
	r.next = (r.next + 1) % oldKept
	r.n = min(r.n+1, oldKept)
}

// list is the kept messages, oldest first, in a new slice.
func (r *oldRing) list() []oldMsg {
	if r.n < oldKept {
		return slices.Clone(r.msgs[:r.n])
	}
	return append(slices.Clone(r.msgs[r.next:]), r.msgs[:r.next]...)
}

// ringOf is node i's ring in rings, which grows to hold it.
func ringOf(rings *[]*oldRing, i int) *oldRing {
	for len(*rings) <= i {
		*rings = append(*rings, nil)
	}
	if (*rings)[i] == nil {
		(*rings)[i] = new(oldRing)
	}
	return (*rings)[i]
}

// harshKinds is how many of randomFault's draws go to harshFault.
const harshKinds = 8

// clockRate is a new node's clock rate: random within the drift bound, or,
// in a drift_bound seed, fast or slow at it. Every pair of a fast and a
// slow clock is exactly MaxDrift apart in the holder's lease arithmetic:
// the slow one runs at fast × (1 − MaxDrift).
func (s *Sim) clockRate() float64 {
	h := &s.harsh
	if !h.driftSet {
		h.driftSet = true
		h.driftBound = s.rng.IntN(2) == 0
		h.fastNext = s.rng.IntN(2) == 0
		if h.driftBound {
			s.faults["drift_bound"]++
		}
	}
	if !h.driftBound {
		return 1 + (s.rng.Float64()-0.5)*simDrift
	}
	fast := 1 + simDrift/2
	// The first two nodes take both directions; the rest are random.
	var isFast bool
	switch len(s.nodes) {
	case 0:
		isFast = h.fastNext
	case 1:
		isFast = !h.fastNext
	default:
		isFast = s.rng.IntN(2) == 0
	}
	if isFast {
		return fast
	}
	return fast * (1 - simDrift)
}

// clockStall is a suspend that a node's lease clock missed, in true time.
// While the process is paused its clock is modelled as counting (every
// check sees a plain pause); at the resume the clock is found behind by
// the whole stall: from then on every reading is the stall shorter. The
// stall ends at the resume that ends the pause, whichever it is
// (endStall), so the process never reads its clock in between, and its
// readings never go back.
type clockStall struct{ from, to time.Time }

// stalledSince is how long n's lease clock stood still, in the suspends it
// missed, from true time from on.
func (n *simNode) stalledSince(from time.Time) time.Duration {
	var d time.Duration
	for _, st := range n.stalls {
		if st.to.After(from) {
			start := st.from
			if from.After(start) {
				start = from
			}
			d += st.to.Sub(start)
		}
	}
	return d
}

func (n *simNode) stalledLocal(t time.Time) time.Time {
	run := t.Sub(simBase)
	for _, st := range n.stalls {
		if t.Before(st.to) {
			break
		}
		run -= st.to.Sub(st.from)
	}
	return simBase.Add(n.clock.Offset + time.Duration(float64(run)*n.clock.Rate))
}

// stalledTrueAt is the latest true time at which the clock reads l.
func (n *simNode) stalledTrueAt(l time.Time) time.Time {
	run := time.Duration(float64(l.Sub(simBase)-n.clock.Offset) / n.clock.Rate)
	var missed time.Duration
	for _, st := range n.stalls {
		missed += st.to.Sub(st.from)
	}
	for i := len(n.stalls) - 1; i >= 0; i-- {
		if t := simBase.Add(run + missed); !t.Before(n.stalls[i].to) {
			return t
		}
		missed -= n.stalls[i].to.Sub(n.stalls[i].from)
	}
	return simBase.Add(run)
}

// keepOld remembers messages for old_replay, and detains one in 30 of
// them (it reports true: the caller does not send it): a detained
// message arrives after its sender's or receiver's next restart by
// old_replay, or 3 s late if none comes. At Grants, in seeds that do, it
// times acquires at the lease's ends.
func (s *Sim) keepOld(from, to *simNode, env msg.Envelope) (detained bool) {
	h := &s.harsh
	if h.keep && keptKind(env.Body) {
		m := oldMsg{to: to.idx, env: env}
		ringOf(&h.sentBy, from.idx).add(m)
		ringOf(&h.sentTo, to.idx).add(m)
		if s.now.Before(s.harsh.holdFrom[from.idx]) || s.now.Before(s.healedAt) && s.rng.IntN(30) == 0 {
			d := &detainedMsg{oldMsg: m, from: from.idx}
			h.detained = append(h.detained, d)
			s.After(3*time.Second, func() { s.releaseDetained(d) })
			detained = true
		}
	}
	if g, ok := env.Body.(msg.Grant); ok && h.boundaries && s.now.Before(s.healedAt) && s.rng.IntN(4) == 0 {
		s.faults["boundary_acquire"]++
		// The holder's end (anchored no later than now, shortened by the
		// drift bound) and the home's end (its clock, lease + Skew).
		holderEnd := to.trueAt(to.local(s.now).Add(g.Lease - time.Duration(float64(g.Lease)*simDrift)))
		homeEnd := from.trueAt(from.local(s.now).Add(g.Lease + simSkew))
		// The closures capture the key alone: capturing g would move every
		// Grant assertion above to the heap, boundary seed or not.
		key := g.Key
		for _, at := range []time.Time{holderEnd, homeEnd} {
			for _, d := range []time.Duration{-time.Microsecond, 0, time.Microsecond} {
				if s.rng.IntN(3) == 0 {
					s.at(at.Add(d), &event{kind: evFault, run: func() { s.lockOnce(s.randomNode(), key) }})
				}
			}
		}
	}
	return detained
}

// keptKind: liveness rounds and their answers would crowd every other
// message out of the kept ones; they carry a nonce, so an old one is
// refused anyway.
func keptKind(b msg.Body) bool {
	switch b.(type) {
	case msg.Renewal, msg.RenewalAnswer:
		return false
	}
	return true
}

// lockOnce has n lock key now, once: a targeted acquire beside the
// node's lockers, with nothing scheduled after it.
func (s *Sim) lockOnce(n *simNode, key string) {
	if n == nil || n.core == nil || n.paused || n.gone || !s.now.Before(s.healedAt) {
		return
	}
	s.startLock(n, &critical{key: key, oneShot: true}, simWait+s.queueWait())
}

// harshFault is one of randomFault's draws: k in [0, harshKinds).
func (s *Sim) harshFault(k int, upTo func(time.Duration) time.Duration) {
	switch k {
	case 0: // a suspend the lease clock misses, or a few short ones
		n := s.randomNode()
		if n.core == nil || n.paused {
			return
		}
		if s.rng.IntN(2) == 0 {
			s.shortStalls(n)
			return
		}
		s.stallSuspend(n, simSkew+time.Millisecond+time.Duration(s.rng.Int64N(int64(2500*time.Millisecond))))
	case 1: // a suspend the lease clock counts: messages first on resume
		n := s.randomNode()
		if n.core == nil || n.paused {
			return
		}
		s.faults["suspend"]++
		s.budget(2)
		s.pause(n)
		d := simSkew + time.Duration(s.rng.Int64N(int64(simEpochLease+simLease)))
		s.After(d, func() { s.resumeMessagesFirst(n) })
	case 2: // delays of seconds
		s.faults["delay_seconds"]++
		s.longNet(500*time.Millisecond + time.Duration(s.rng.Int64N(int64(2500*time.Millisecond))))
		s.After(upTo(3*time.Second), func() { s.longNet(0) })
	case 3: // old messages across a restart, both ways
		if !s.harsh.keep {
			return
		}
		n := s.randomNode()
		if n.core == nil {
			return
		}
		s.faults["old_replay"]++
		s.budget(2)
		// Everything n sends for a moment stays in flight; then n crashes.
		hold := time.Duration(s.rng.Int64N(int64(150 * time.Millisecond)))
		s.harsh.holdFrom[n.idx] = s.now.Add(hold)
		s.After(hold, func() { s.oldReplay(n) })
	case 4: // epoch changes in quick succession during the gates
		s.gateEpochs()
	case 5, 6: // a busy cut-off minority
		s.minorityBusy()
	case 7: // a restart gate with an epoch change right behind it
		n := s.randomNode()
		if n.core == nil {
			return
		}
		s.faults["gate_epochs"]++
		s.budget(2)
		s.crash(n)
		s.After(20*time.Millisecond+time.Duration(s.rng.Int64N(int64(200*time.Millisecond))), func() {
			s.restart(n)
			s.After(time.Duration(s.rng.Int64N(int64(600*time.Millisecond))), func() { s.gateEpochs() })
		})
	}
}

// stallSuspend suspends n for d with its lease clock stopped; on resume
// the driver reads its clocks before anything else runs, and the core
// judges the jump (core.ObserveClocks): wall time ahead by d, more than
// Skew, less what the lease clock's drift made up since the last reading.
func (s *Sim) stallSuspend(n *simNode, d time.Duration) {
	if n.core == nil || n.paused {
		return
	}
	s.faults["clock_jump"]++
	s.budget(2) // a pause long enough to be agreed down, and its rejoin
	s.stall(n, d)
}

// shortStalls suspends n two to four times, 20 to 140 ms each with its
// lease clock stopped, 10 to 400 ms apart: each stall is under JumpAfter
// (148.5 ms) alone, so whether the core takes a jump depends on how they
// and the clock's drift add up within EpochLease.
func (s *Sim) shortStalls(n *simNode) {
	s.faults["clock_stall_short"]++
	var at time.Duration
	for range 2 + s.rng.IntN(3) {
		d := 20*time.Millisecond + time.Duration(s.rng.Int64N(int64(120*time.Millisecond)))
		s.After(at, func() {
			if n.core != nil && !n.paused {
				s.stall(n, d)
			}
		})
		at += d + 10*time.Millisecond + time.Duration(s.rng.Int64N(int64(390*time.Millisecond)))
	}
}

// stall pauses n for d with its lease clock stopped (stallSuspend).
func (s *Sim) stall(n *simNode, d time.Duration) {
	s.pause(n)
	from := s.now
	n.stallFrom, n.stallUntil = from, from.Add(d)
	s.trace("suspend %s, lease clock stopped", n.id)
	s.After(d, func() {
		if n.stallFrom != from {
			return // crashed or resumed meanwhile (endStall)
		}
		s.resume(n)
	})
}

// resuming is where every resume of n begins: it reports whether n runs
// paused, ending the stall of a suspend it is in first (endStall), so that
// no resume path can leave one open.
func (s *Sim) resuming(n *simNode) bool {
	if n.core == nil || !n.paused {
		return false
	}
	s.endStall(n)
	return n.core != nil && n.paused
}

// endStall ends the suspend n's lease clock misses, if one lasts, as n
// resumes, whichever fault resumes it (the suspend's own timer, another
// pause's, the heal): the stall is recorded and the core judges the jump
// before anything else runs. A stall recorded later than the resume would
// cover time n ran in, and n's clock would then read earlier than it read
// before: the home's queue would hold a waiter that joined "before" one
// that had waited longer (seed 691,285).
func (s *Sim) endStall(n *simNode) {
	if n.stallFrom.IsZero() {
		return
	}
	if s.now.Before(n.stallUntil) {
		s.faults["clock_jump_cut_short"]++
	}
	n.stalls = append(n.stalls, clockStall{from: n.stallFrom, to: s.now})
	n.stallFrom = time.Time{}
	n.observeClocks(s)
}

// jumpedAnchor is the schedule of the clock-jump anchor hazard (H9): n2
// asks for a key homed at n1 and is suspended, its lease clock stopped,
// before the Grant arrives; n1 waits the lease out and grants n3. On
// resume n2 learns of the jump and then receives the old Grant, anchored
// at a reading from before the jump: it must give it back.
func jumpedAnchor(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
		s.stallSuspend(s.Node("n2"), simLease+simSkew+500*time.Millisecond)
	})
	s.After(at+simLease+simSkew+100*time.Millisecond, func() { s.LockKey("n3", key) })
}

// addedStalls is the schedule of stalls that add up (H9): n2 holds a key
// homed at n1 in a 5 s section, cut off from n1, while n3 asks for the key;
// n2 is suspended four times with its lease clock stopped, 70 ms each
// (each under JumpAfter, 148.5 ms here), and resumed each time by another
// fault. Together its clock falls 280 ms behind, more than Skew: unless the
// lag adds up to a jump, n2's section outlives the delegation n1 waited
// out, and n1 grants n3.
func addedStalls(s *Sim) {
	start := simEpochLease + simSkew + 300*time.Millisecond
	n2 := s.Node("n2")
	var key string
	s.After(start, func() {
		key = s.keyHomedAt("n1")
		s.LockKeyFor("n2", key, 5*time.Second)
	})
	s.After(start+200*time.Millisecond, func() {
		s.Cut("n1", "n2")
		s.LockKey("n3", key)
	})
	for i := range 4 {
		at := start + 300*time.Millisecond + time.Duration(i)*130*time.Millisecond
		s.After(at, func() { s.stallSuspend(n2, time.Second) })
		s.After(at+70*time.Millisecond, func() { s.Resume("n2") })
	}
}

// stackedLags is the schedule of hazard_h9_stacked (H9) on five nodes: just
// after one of n1's liveness rounds, n1 and n2 are cut off from n3, n4 and
// n5, and n3 removes n1, so a key homed at n1 moves to one of those three,
// whose gate ends EpochLease + Skew after it learns the new epoch. n1 still
// grants the key to n2 near the end of its liveness, and both lease clocks
// stall unseen (110 ms each), n1's before the grant and n2's after. The
// home's record of the delegation (lease + Skew) must still end before the
// new home's gate, as must n2's delegation.
func stackedLags(s *Sim) {
	start := simEpochLease + simSkew + 300*time.Millisecond
	n1 := s.Node("n1")
	var last time.Time
	var poll func()
	poll = func() {
		lu := n1.core.LiveUntil()
		if last.IsZero() || !lu.After(last) {
			last = lu
			s.After(time.Millisecond, poll)
			return
		}
		// A round of n1's just gathered its majority: cut and remove now,
		// so the new epoch is learned soon after that round was sent.
		key := s.keyMovingFrom("n1", "n2")
		for _, a := range []string{"n1", "n2"} {
			for _, b := range []string{"n3", "n4", "n5"} {
				s.Cut(a, b)
			}
		}
		s.ProposeRemove("n3", "n1")
		s.After(time.Second, func() { s.stallSuspend(n1, 110*time.Millisecond) })
		s.After(2500*time.Millisecond, func() { s.LockKeyFor("n2", key, 2*time.Second) })
		s.After(2530*time.Millisecond, func() { s.stallSuspend(s.Node("n2"), 110*time.Millisecond) })
		s.After(2900*time.Millisecond, func() { s.LockKey("n4", key) })
	}
	s.After(start, poll)
}

// oldReplay crashes n and restarts it; then what was in flight from or
// to its old process arrives, and copies of messages it sent and received
// before, reordered and some twice.
func (s *Sim) oldReplay(n *simNode) {
	delete(s.harsh.holdFrom, n.idx)
	byOld := ringOf(&s.harsh.sentBy, n.idx).list()
	toOld := ringOf(&s.harsh.sentTo, n.idx).list()
	s.crash(n)
	back := 20*time.Millisecond + time.Duration(s.rng.Int64N(int64(400*time.Millisecond)))
	s.After(back, func() { s.restart(n) })
	var keep []*detainedMsg
	for _, d := range s.harsh.detained {
		if d.done {
			continue
		}
		keep = append(keep, d)
		if d.from == n.idx || d.to == n.idx {
			s.After(back+time.Duration(s.rng.Int64N(int64(600*time.Millisecond))), func() { s.releaseDetained(d) })
		}
	}
	s.harsh.detained = keep
	for _, m := range append(byOld, toOld...) {
		if s.rng.IntN(3) != 0 {
			continue
		}
		for c := 0; c < 1+s.rng.IntN(2); c++ {
			at := back + time.Duration(s.rng.Int64N(int64(1500*time.Millisecond)))
			s.After(at, func() { s.deliverOld(m) })
		}
	}
}

// deliverOld delivers a kept message to its destination's current process.
func (s *Sim) deliverOld(m oldMsg) {
	to := s.nodes[m.to]
	if to.core == nil {
		return
	}
	s.trace("old message %s->%s %v", m.env.From.ID, to.id, described{m.env.Body})
	s.at(s.now, &event{kind: evDeliver, node: to.idx, env: m.env, gen: to.gen})
}

// resumeMessagesFirst resumes n with the messages that waited handled
// before its first tick, as goroutines woken by a resume may run.
func (s *Sim) resumeMessagesFirst(n *simNode) {
	if !s.resuming(n) {
		return
	}
	s.trace("resume %s, messages first", n.id)
	n.paused = false
	d := n.deferred
	n.deferred = nil
	n.tickSeq = 0
	for _, e := range d {
		if e.kind == evDeliver && n.core != nil && e.gen == n.gen && !n.paused {
			s.dispatch(e)
		}
	}
	for _, e := range d {
		if e.kind != evTick && e.kind != evDeliver {
			s.at(s.now, e)
		}
	}
	if n.core != nil && !n.paused {
		n.tick(s)
	}
}

// gateEpochs has live members remove two or three others one after another,
// 100 to 800 ms apart: each change starts gates while the last one's run.
// The removed nodes are alive and join again on their own.
func (s *Sim) gateEpochs() {
	if !s.now.Before(s.healedAt) {
		return
	}
	live := s.liveOutside(nil)
	if len(live) < 3 {
		return
	}
	s.faults["gate_epochs"]++
	perm := s.rng.Perm(len(live))
	k := 2 + s.rng.IntN(2)
	at := time.Duration(0)
	for i := 0; i < k && i < len(live); i++ {
		victim := live[perm[i]]
		s.budget(2)
		s.After(at, func() {
			p := s.someLiveMember(victim)
			if p == nil || !p.up() || !s.now.Before(s.healedAt) {
				return
			}
			s.trace("gate epochs: %s removes %s", p.id, victim.id)
			p.apply(s, p.core.ProposeRemove(p.local(s.now), victim.member))
		})
		at += 100*time.Millisecond + time.Duration(s.rng.Int64N(int64(700*time.Millisecond)))
	}
}

// minorityBusy cuts off a minority whose members keep locking keys they
// home until their liveness must have ended (EpochLease + Skew after the
// cut, and a margin), while majority nodes ask for the same keys; some
// acquires land right at the derived end of the minority's liveness.
func (s *Sim) minorityBusy() {
	minority := s.minority()
	if len(minority) >= len(s.nodes) {
		return
	}
	s.faults["minority_busy"]++
	s.budget(2 * len(minority))
	s.trace("minority busy %v", ids(minority))
	s.cutOff(minority, false)
	until := simEpochLease + simSkew + 300*time.Millisecond
	for _, n := range minority {
		keys := s.keysHomedBy(n, 3)
		if len(keys) == 0 {
			continue
		}
		for t := time.Duration(0); t < until; t += 10*time.Millisecond + time.Duration(s.rng.Int64N(int64(60*time.Millisecond))) {
			key := keys[s.rng.IntN(len(keys))]
			s.After(t, func() { s.lockOnce(n, key) })
			if s.rng.IntN(3) == 0 {
				s.After(t, func() { s.lockOnce(s.randomNode(), key) })
			}
		}
		// At the end of n's liveness as the independent checker derived it.
		s.After(time.Millisecond, func() {
			end, ok := s.indep.LiveUntil(n)
			if !ok || end.IsZero() {
				return
			}
			at := n.trueAt(end)
			for _, d := range []time.Duration{-time.Millisecond, -time.Microsecond, 0, time.Microsecond} {
				key := keys[s.rng.IntN(len(keys))]
				if at.Add(d).After(s.now) {
					s.at(at.Add(d), &event{kind: evFault, run: func() { s.lockOnce(n, key) }})
					s.at(at.Add(d), &event{kind: evFault, run: func() { s.lockOnce(s.randomNode(), key) }})
				}
			}
		})
	}
	s.After(until+upTo(s, time.Second), func() { s.healLinks(minority) })
}

func upTo(s *Sim, d time.Duration) time.Duration {
	return time.Duration(s.rng.Int64N(int64(d)))
}

// keysHomedBy returns up to k keys whose home is n in the epoch n learned.
func (s *Sim) keysHomedBy(n *simNode, k int) []string {
	if n.disk.Learned() == nil {
		return nil
	}
	ring := epoch.NewRing(n.disk.Learned().Epoch)
	var out []string
	for i := 0; len(out) < k && i < 200; i++ {
		key := fmt.Sprintf("m-%d", i)
		if h, ok := ring.Home(key); ok && h.ID == n.id {
			out = append(out, key)
		}
	}
	return out
}
