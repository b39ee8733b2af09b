package clustertest

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/epoch"
)

// Fixed schedules for rules that random schedules do not reach: each ports
// the schedule of a datadriven hazard script into the simulator, where the
// independent checker, not a golden transcript, has to notice the break.

// LockKey has node id lock key now, as one of its lockers would.
func (s *Sim) LockKey(id, key string) {
	n := s.Node(id)
	if n == nil || n.core == nil || n.paused {
		return
	}
	n.nextID++
	cs := &critical{node: n, gen: n.gen, locker: n.nextID, key: key, started: s.now}
	n.lockers[cs.locker] = cs
	now := n.local(s.now)
	deadline := now.Add(simWait)
	s.check.lockStarted(cs, n.trueAt(deadline))
	n.apply(s, n.core.Lock(now, key, cs.locker, deadline, 0))
}

// keyHomedAt returns a key whose home is node id in the epoch node id has
// learned.
func (s *Sim) keyHomedAt(id string) string {
	n := s.Node(id)
	if n.disk.learned == nil {
		return "k0"
	}
	ring := epoch.NewRing(n.disk.learned.Epoch)
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if h, ok := ring.Home(k); ok && string(h.ID) == id {
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
		s.net.slow = true
		key = s.keyHomedAt("n1")
		s.LockKey("n2", key)
	})
	s.After(at+3*time.Millisecond, func() { s.Crash("n1") })
	s.After(at+6*time.Millisecond, func() { s.Restart("n1") })
	s.After(at+200*time.Millisecond, func() {
		s.net.slow = false
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
