package clustertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// Fixed schedules for rules that random schedules do not reach: each ports
// the schedule of a datadriven hazard script into the simulator, where the
// independent checker, not a golden transcript, has to notice the break.

// LockKey has node id lock key now, as one of its lockers would.
func (s *Sim) LockKey(id, key string) { s.LockKeyFor(id, key, 0) }

// LockKeyFor is LockKey with a section that runs for hold once admitted
// (0: as long as the workload's sections do), held while its node is alive.
func (s *Sim) LockKeyFor(id, key string, hold time.Duration) {
	s.lockKey(id, &critical{key: key, hold: hold})
}

// LockKeyOwed is LockKeyFor with a section the checker requires to keep its
// lock to its end (L6) from admission, whatever the schedule does meanwhile.
func (s *Sim) LockKeyOwed(id, key string, hold time.Duration) {
	s.lockKey(id, &critical{key: key, hold: hold, owed: true})
}

func (s *Sim) lockKey(id string, cs *critical) {
	n := s.Node(id)
	if n == nil || n.core == nil || n.paused {
		return
	}
	s.startLock(n, cs, simWait)
}

// keyHomedAt returns a key whose home is node id in the epoch node id has
// learned.
func (s *Sim) keyHomedAt(id string) string {
	n := s.Node(id)
	if n.disk.Learned() == nil {
		return "k0"
	}
	ring := epoch.NewRing(n.disk.Learned().Epoch)
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if h, ok := ring.Home(k); ok && string(h.ID) == id {
			return k
		}
	}
}

// keyMovingFrom returns a key whose home is node from in the epoch from has
// learned, and, in that epoch without from, neither from nor notTo.
func (s *Sim) keyMovingFrom(from, notTo string) string {
	l := s.Node(from).disk.Learned()
	if l == nil {
		return "k0"
	}
	ring := epoch.NewRing(l.Epoch)
	without := l.Epoch
	without.Members = slices.DeleteFunc(slices.Clone(without.Members), func(m msg.Member) bool { return string(m.ID) == from })
	next := epoch.NewRing(without)
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		h, _ := ring.Home(k)
		h2, _ := next.Home(k)
		if string(h.ID) == from && string(h2.ID) != notTo {
			return k
		}
	}
}

// twiceRestartedHome is hazard_h3's schedule: n2 holds a key homed at n1
// while n1 restarts twice; the second incarnation must learn of the
// delegation its first predecessor granted, or it grants the key to n3
// while n2 still holds it. It starts once n1's gate-passed marker is
// written, so that a complete reclaim waives the restart gate.
func twiceRestartedHome(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+50*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+100*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+200*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+250*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+350*time.Millisecond, func() { s.LockKey("n3", key) })
}

// fixedSchedule returns the default configuration of seed running script
// on three nodes with no random workload.
func fixedSchedule(seed uint64, script func(*Sim)) SimConfig {
	cfg := scripted(seed, script, nil)
	cfg.Lockers = 0
	return cfg
}

// lateOldGrant is hazard_h1's schedule: n1 grants a key to n2 and crashes
// while the Grant is slow on the network; its next incarnation reclaims from
// n2 before the old Grant arrives. n2 must ignore the old incarnation's
// Grant, which its new incarnation knows nothing of; n3 then asks for the
// key. Only seeds whose delays hold the Grant past the reclaim expose it.
func lateOldGrant(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		s.slowNet(true)
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+3*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+6*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+200*time.Millisecond, func() {
		s.slowNet(false)
		s.LockKey("n3", key)
	})
}

// pausedAdoptedHolder: n2 holds an idle delegation of a key homed at n1
// when n1 restarts (its gate-passed marker written, so a complete reclaim
// waives the restart gate); n1 adopts the delegation from n2's answer, n2
// then pauses (it neither renews nor releases) and n3 asks for the key. n1
// must wait the adopted lease out plus Skew before it grants: n2's clock
// may run slow.
func pausedAdoptedHolder(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+50*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+60*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+250*time.Millisecond, func() { s.Pause("n2") })
	s.After(at+300*time.Millisecond, func() { s.LockKey("n3", key) })
	s.After(at+4*time.Second, func() { s.Resume("n2") })
}

// pausedHolderAtRestart: with leases as long as the epoch liveness allows,
// n2 takes a key homed at n1 and pauses inside its section; n1 restarts at
// once, and its Reclaim waits at the paused n2, so only the restart gate
// (EpochLease + Skew) keeps n1 from granting the key to n3 while n2's
// delegation may still be live. Seeds whose grant follows a renewal round
// closely (its lease reaches nearly EpochLease) expose a gate without Skew.
func pausedHolderAtRestart(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond + time.Duration(s.rng.Int64N(int64(simEpochLease/3)))
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+15*time.Millisecond, func() { s.Pause("n2") })
	s.After(at+20*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+25*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+100*time.Millisecond, func() { s.LockKey("n3", key) })
	s.After(at+5*time.Second, func() { s.Resume("n2") })
}

// longLeases returns the fixed schedule of script with delegation leases
// just below the epoch lease.
func longLeases(seed uint64, script func(*Sim)) SimConfig {
	cfg := fixedSchedule(seed, script)
	cfg.Lease = simEpochLease - 100*time.Millisecond
	return cfg
}

// unusedInheritance is hazard_h18's schedule: n2 writes a key homed at n1
// and hands it on to n3 when n3 asks; n3's locker gives up while the
// store's wait hook runs, and n2 asks again. Recalled, n3 admitted nothing,
// and must pass on the barrier it inherited, not its own store's older
// position. Every store hook takes 300ms.
func unusedInheritance(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+50*time.Millisecond, func() { s.LockKey("n3", key) })
	s.After(at+450*time.Millisecond, func() { s.CancelLocks("n3", key) })
	s.After(at+500*time.Millisecond, func() { s.LockKey("n2", key) })
}

// lateSettle is hazard_h20's schedule: n2's barrier hook for a key outlasts
// its delegation (every hook takes 1.4s); n2 locks the key again, gets the
// next delegation, writes and settles it; the first hook's completion then
// arrives. It names the first token and must not release the second.
func lateSettle(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+time.Second, func() { s.LockKey("n2", key) })
}

// slowHooks returns the fixed schedule of script with every store hook
// taking d.
func slowHooks(seed uint64, script func(*Sim), d time.Duration) SimConfig {
	cfg := fixedSchedule(seed, script)
	cfg.SlowHooks = d
	return cfg
}

// renewedOutsider is hazard_h14's schedule: n3 runs a long section on a key
// homed at n1 when n1 removes it from the epoch (n3's joins are dropped, so
// it stays out). n1 must recall the delegation and refuse to renew it: once
// e2's gate-passed marker is written, n1 restarts, reclaims from e2's
// members only, and grants the key to n2. A home that kept renewing the
// outsider's delegation grants it while n3 still holds it.
func renewedOutsider(s *Sim) {
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		j, join := env.Body.(msg.Join)
		return !(join && (from == "n3" || j.Member.ID == "n3"))
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKeyFor("n3", key, 8*time.Second)
	})
	s.After(at+100*time.Millisecond, func() { s.ProposeRemove("n1", "n3") })
	restart := at + 100*time.Millisecond + simEpochLease + simSkew + 500*time.Millisecond
	s.After(restart, func() { s.Crash("n1") })
	s.After(restart+10*time.Millisecond, func() { s.Restart("n1") })
	s.After(restart+100*time.Millisecond, func() { s.LockKey("n2", key) })
}

// keyMovingOff returns a key homed at id in the epoch node by has learned,
// and at to in that epoch without id.
func (s *Sim) keyMovingOff(by, id, to string) string {
	e := s.Node(by).disk.Learned().Epoch
	without := e.Clone()
	without.Members = nil
	for _, m := range e.Members {
		if string(m.ID) != id {
			without.Members = append(without.Members, m)
		}
	}
	with, wo := epoch.NewRing(e), epoch.NewRing(without)
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		h1, _ := with.Home(k)
		h2, _ := wo.Home(k)
		if string(h1.ID) == id && string(h2.ID) == to {
			return k
		}
	}
}

// staleDrained is hazard_h5_stale's schedule on four nodes: key k moves
// from n4 to n1 (n4 removed), back to n4 (n4 joins; n1's Drained for that
// move, sent once n1's own gate passed, is kept), to n1 again, where n2
// takes it for a long section, and back to n4. Then the kept Drained, for
// the earlier move, reaches n4 as n3 asks for k: n4 must not take it as
// vouching for the current move, and waits for n1, whose delegation to n2
// is still live.
func staleDrained(s *Sim) {
	joins := false
	var key string
	var kept *msg.Envelope
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		switch b := env.Body.(type) {
		case msg.Join:
			return joins || (from != "n4" && b.Member.ID != "n4")
		case msg.Drained:
			if kept == nil && b.Key == key && from == "n1" && to == "n4" {
				c := env
				kept = &c
			}
		}
		return true
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	s.After(at, func() {
		key = s.keyMovingOff("n1", "n4", "n1")
		s.ProposeRemove("n1", "n4")
	})
	s.After(at+500*time.Millisecond, func() { joins = true })
	s.After(at+time.Second, func() {
		joins = false
		s.LockKey("n3", key) // at n4, gated: n4 asks n1, which drains at its gate's end
	})
	second := uint64(0)
	s.After(at+4*time.Second, func() {
		second = s.Node("n1").disk.Learned().Epoch.Number
		s.ProposeRemove("n1", "n4")
	})
	s.After(at+4500*time.Millisecond, func() { s.LockKeyFor("n2", key, 8*time.Second) })
	// Once n4 is back in an epoch after the second removal, the kept
	// Drained arrives as n3 asks for the key.
	var back func()
	back = func() {
		n := s.Node("n4")
		if l := n.disk.Learned(); n.core == nil || l == nil || l.Epoch.Number <= second || !l.Epoch.Has(n.member) {
			s.After(5*time.Millisecond, back)
			return
		}
		joins = false
		s.LockKey("n3", key)
		if kept != nil {
			s.at(s.now, &event{kind: evDeliver, node: n.idx, env: *kept, gen: n.gen})
		}
	}
	s.After(at+5500*time.Millisecond, func() {
		joins = true
		back()
	})
}

// wipedHome: n2 runs a section of four leases on a key homed at n1 when n1
// crashes and starts again at once on a wiped disk under its old ID, and n3
// asks for the key. The new store never served the key and cannot know
// n2's delegation, which may still run: it must not grant the key before
// its activation gate (H25: it took the old store's epochs for its own and
// granted at once).
func wipedHome(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyHomedAt("n1")
		s.LockKeyFor("n2", key, 4*simLease)
	})
	s.After(at+300*time.Millisecond, func() {
		n1 := s.Node("n1")
		s.crash(n1)
		s.wipe(n1, n1.disk.Store+1)
		s.restart(n1)
	})
	s.After(at+400*time.Millisecond, func() { s.LockKey("n3", key) })
}

// staleReclaim: n1 restarts (its store's incarnation 2, whose Reclaim to
// n3 is kept as well as delivered), is then wiped and starts again under
// its old ID (a new store, at incarnation 1 again), and runs a section of
// four leases on a key homed at n3 once its new store is a member. Then the
// old store's Reclaim reaches n3 again, late, and n2 asks for the key. The
// old store's restart says nothing of the new store's delegation, which n3
// must keep (H30: it freed it, as an earlier incarnation of n1's, and
// granted the key to n2 while n1's section ran; found by the simulator's
// random wipes, seed 7,777).
func staleReclaim(s *Sim) {
	var kept *msg.Envelope
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		if _, ok := env.Body.(msg.Reclaim); ok && kept == nil && from == "n1" && to == "n3" && env.FromInc == 2 {
			c := env
			kept = &c
		}
		return true
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	s.After(at, func() {
		n1 := s.Node("n1")
		s.crash(n1)
		s.restart(n1)
	})
	s.After(at+time.Second, func() {
		n1 := s.Node("n1")
		s.crash(n1)
		s.wipe(n1, n1.disk.Store+1)
		s.restart(n1)
	})
	var lockOnceIn func()
	lockOnceIn = func() {
		n1 := s.Node("n1")
		if l := n1.disk.Learned(); n1.core == nil || l == nil || !l.Epoch.Has(n1.member) {
			s.After(10*time.Millisecond, lockOnceIn)
			return
		}
		key := s.keyHomedAt("n3")
		s.LockKeyFor("n1", key, 4*simLease)
		s.After(500*time.Millisecond, func() {
			if n3 := s.Node("n3"); kept != nil {
				s.at(s.now, &event{kind: evDeliver, node: n3.idx, env: *kept, gen: n3.gen})
			}
			s.After(10*time.Millisecond, func() { s.LockKey("n2", key) })
		})
	}
	s.After(at+1100*time.Millisecond, lockOnceIn)
}

// staleGrant: n1 asks for a key homed at n3 and holds it briefly; n3's
// Grant is kept as well as delivered. n1 is then wiped and starts again
// under its old ID, and its new store asks for the same key. The kept
// Grant reaches it, late, numbered as the new store's request is (a new
// store numbers its requests from the start again, so an old Grant can
// match one; here the kept Grant is given the new request's numbers rather
// than left to chance), and n2 asks for the key. The Grant answered the old
// store, in an epoch the new store was no member of, and must not be taken
// (H31: it was, and n1's new store admitted under the old store's released
// delegation while n3 granted the key on; found by the simulator's random
// wipes, seed 35,380).
func staleGrant(s *Sim) {
	var kept *msg.Envelope
	var key string
	wiped, sent := false, false
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		switch b := env.Body.(type) {
		case msg.Grant:
			if kept == nil && from == "n3" && to == "n1" && b.Key == key {
				c := env
				kept = &c
			}
		case msg.Acquire:
			if wiped && !sent && kept != nil && from == "n1" && b.Key == key {
				sent = true
				late := *kept
				g := late.Body.(msg.Grant)
				g.Req, g.Attempt = b.Req, b.Attempt
				late.Body = g
				s.After(time.Millisecond, func() {
					n1 := s.Node("n1")
					s.at(s.now, &event{kind: evDeliver, node: n1.idx, env: late, gen: n1.gen})
					s.LockKeyFor("n2", key, 2*simLease)
				})
			}
		}
		return true
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	s.After(at, func() {
		key = s.keyHomedAt("n3")
		s.LockKeyFor("n1", key, 100*time.Millisecond)
	})
	s.After(at+time.Second, func() {
		n1 := s.Node("n1")
		s.crash(n1)
		s.wipe(n1, n1.disk.Store+1)
		wiped = true
		s.restart(n1)
		s.LockKey("n1", key)
	})
}

// fourNodes returns the fixed schedule of script on four nodes, with the
// faults (the script's filter) lasting 16.5s of 30.
func fourNodes(seed uint64, script func(*Sim)) SimConfig {
	cfg := fixedSchedule(seed, script)
	cfg.Nodes, cfg.Duration = 4, 30*time.Second
	return cfg
}

// fiveNodes is fixedSchedule on five nodes.
func fiveNodes(seed uint64, script func(*Sim)) SimConfig {
	cfg := fixedSchedule(seed, script)
	cfg.Nodes = 5
	return cfg
}

// homeLeavesUnderSection: n2 runs a section of 4s (four leases) on a key
// homed at n1 when n1 leaves cleanly (the key moves to n3), and n4 asks for
// the key 1.5s before the section ends. n1 hands the running delegation to
// n3, which renews it, so the section runs to its end (the checker owes it
// L6 from its admission); n4 gets the key after it, with a higher token.
func homeLeavesUnderSection(s *Sim) {
	homeGoesUnderSection(s, func(n1 *simNode) { s.leaveThenJoin(n1, 8*time.Second) })
}

// homeClosesUnderSection is homeLeavesUnderSection with a SIGTERM to n1
// instead of a Leave: Close hands the running delegation off the same way,
// lingers, ends, and n1 starts again 2s later and joins.
func homeClosesUnderSection(s *Sim) {
	homeGoesUnderSection(s, func(n1 *simNode) { s.closeThenRestart(n1, 2*time.Second) })
}

func homeGoesUnderSection(s *Sim, goes func(n1 *simNode)) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	var key string
	s.After(at, func() {
		key = s.keyMovingOff("n2", "n1", "n3")
		s.LockKeyOwed("n2", key, 4*simLease)
	})
	s.After(at+300*time.Millisecond, func() { goes(s.Node("n1")) })
	s.After(at+4*simLease-1500*time.Millisecond, func() { s.LockKey("n4", key) })
}

// keyAwayAndBack: n4 leaves, then joins again while n2 holds a key that n1
// homes without n4 and n4 with it. n1 hands n2's running delegation to n4,
// which takes it over and renews it, and n4 leaves again at once: the key
// comes back to n1 while n1 still keeps its own record of the delegation,
// which n4's renewal outlasts. n2's first Renew to n1 makes n1 ask n4, which
// hands the delegation back; then n1 and n2 are cut off from each other, so
// no renewal of n1's extends its record, and n3 asks n1 for the key. n1
// must not grant it before the handed-back end (TestTakeOverOwnRecord's
// case).
func keyAwayAndBack(s *Sim) {
	at := simEpochLease + simSkew + 300*time.Millisecond
	n4 := s.Node("n4")
	var key string
	s.After(at, func() {
		key = s.keyMovingOff("n1", "n4", "n1")
		s.leaveThenJoin(n4, 1500*time.Millisecond)
	})
	s.After(at+500*time.Millisecond, func() { s.LockKeyFor("n2", key, 4*simLease) })
	back, cut := false, false
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		if r, ok := env.Body.(msg.Renew); ok && back && !cut && from == "n2" && to == "n1" && r.Key == key {
			cut = true
			s.After(0, func() { s.Cut("n1", "n2") })
			s.After(50*time.Millisecond, func() { s.LockKey("n3", key) })
			s.After(3*simLease, func() { s.Mend("n1", "n2") })
		}
		return true
	}
	var poll func()
	poll = func() {
		if n4.core == nil {
			return
		}
		if _, holder, ok := n4.core.Home().Holding(key); !ok || holder != "n2" {
			s.After(time.Millisecond, poll)
			return
		}
		// n4 took the delegation over; n2's Renew that asked for it is
		// answered within a retry interval.
		s.After(80*time.Millisecond, func() {
			back = true
			s.leaveThenJoin(n4, 10*time.Second)
		})
	}
	s.After(at+1500*time.Millisecond, poll)
}

// heldUpLeave: n2 leaves cleanly and asks to join again 700ms later; its
// Leave to n3 is held up in the network until n3 has learned the epoch that
// took n2 back. That Leave predates n2's rejoining and must remove nobody:
// honoured, it cost two more epochs (M2) and removed a live member (seed
// 527,009).
func heldUpLeave(s *Sim) {
	var kept *msg.Envelope
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		if _, ok := env.Body.(msg.Leave); ok && from == "n2" && to == "n3" && kept == nil {
			c := env
			kept = &c
			return false
		}
		return true
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	before := uint64(0)
	s.After(at, func() {
		before = s.Node("n3").disk.Learned().Epoch.Number
		s.leaveThenJoin(s.Node("n2"), 700*time.Millisecond)
	})
	var back func()
	back = func() {
		n2, n3 := s.Node("n2"), s.Node("n3")
		if l := n3.disk.Learned(); kept == nil || n3.core == nil || l == nil || l.Epoch.Number < before+2 || !l.Epoch.Has(n2.member) {
			s.After(5*time.Millisecond, back)
			return
		}
		s.trace("deliver the held-up Leave of n2 to n3")
		s.at(s.now, &event{kind: evDeliver, node: n3.idx, env: *kept, gen: n3.gen})
	}
	s.After(at+time.Second, back)
}

// heldUpJoin: n2 leaves cleanly and asks to join again 700ms later; its
// first Join is held up in the network. n2 joins through another member
// all the same, then leaves for good (its process ends, as after Close),
// and only then does the held-up Join arrive. It predates n2's last
// membership and must add nobody: honoured, it adds back a node that is
// gone, whose removal then costs two more epochs (M2) and leaves its keys
// waiting for down detection.
func heldUpJoin(s *Sim) {
	var kept *msg.Envelope
	var keptTo msg.NodeID
	s.cfg.Filter = func(from, to msg.NodeID, env msg.Envelope) bool {
		if _, ok := env.Body.(msg.Join); ok && from == "n2" && kept == nil {
			c := env
			kept, keptTo = &c, to
			return false
		}
		return true
	}
	at := simEpochLease + simSkew + 300*time.Millisecond
	var before uint64
	s.After(at, func() {
		before = s.Node("n1").disk.Learned().Epoch.Number
		s.leaveThenJoin(s.Node("n2"), 700*time.Millisecond)
	})
	// learnedBy: the member the Join was held from has learned epoch
	// before+k and in says whether n2 is in it.
	learnedBy := func(k uint64, in bool) bool {
		if kept == nil {
			return false
		}
		m := s.Node(string(keptTo))
		l := m.disk.Learned()
		return m.core != nil && l != nil && l.Epoch.Number >= before+k && l.Epoch.Has(s.Node("n2").member) == in
	}
	var leaveAgain, deliver func()
	leaveAgain = func() {
		if !learnedBy(2, true) {
			s.After(5*time.Millisecond, leaveAgain)
			return
		}
		s.trace("n2 closes")
		n2 := s.Node("n2")
		s.budget(1)
		n2.apply(s, n2.core.Leave(n2.local(s.now), true)) // Close's leave: guarded
		s.After(5*time.Millisecond, deliver)
	}
	deliver = func() {
		if !learnedBy(3, false) {
			s.After(5*time.Millisecond, deliver)
			return
		}
		s.Node("n2").gone = true // its process ended, as Close's does
		s.Crash("n2")
		s.faultsOver()
		m := s.Node(string(keptTo))
		s.trace("deliver the held-up Join of n2 to %s", keptTo)
		s.at(s.now, &event{kind: evDeliver, node: m.idx, env: *kept, gen: m.gen})
	}
	s.After(at+time.Second, leaveAgain)
}
