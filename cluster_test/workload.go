package clustertest

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/simtest/lockcheck"
)

// critical is one locker's request and, once admitted, its critical section.
type critical struct {
	node    *simNode
	gen     uint64
	locker  uint64
	key     string
	started time.Time // true time of the Lock call
	// deadline is when the locker gives up, on its node's clock.
	deadline time.Time
	// Set on admission.
	admitted bool
	token    fence.Token
	signed   []byte    // the signed grant the holder handed the section
	at       time.Time // true time of admission
	expires  time.Time // on the holder's clock
	read     int
	readOK   bool
	closed   bool
	resolved bool
	// lease is the section's own lease (0: held while its holder is alive);
	// long sections outlast the delegation lease, so they live by renewal.
	lease time.Duration
	long  bool
	// hold, when set, is how long the section runs (fixed schedules).
	hold time.Duration
	// owed: a fixed schedule owes this section held-while-alive from its
	// admission, faults or not (its faults are the ones it means to ride).
	owed bool
	// oneShot: a targeted acquire (harsh.go), not one of the node's
	// lockers, so nothing follows it.
	oneShot bool
	// silentFor: the locker gives way to a home that answers nothing for
	// this long (homelock.WithHomeSilence), as the lock command does with
	// another node to ask.
	silentFor time.Duration
}

// longKey is locked only by long critical sections (1 to 1.6 leases), so
// that waiting behind them is never a timeout elsewhere.
const longKey = "long-0"

const (
	simWait     = 3 * time.Second
	simLockStop = 1500 * time.Millisecond // no new locks this close to the end
)

func (s *Sim) keyName(hot bool, i int) string {
	if hot {
		return s.hotKeys[i]
	}
	return s.coldKeys[i]
}

func (s *Sim) startWorkload() {
	for i := 0; i < s.cfg.HotKeys; i++ {
		s.hotKeys = append(s.hotKeys, fmt.Sprintf("hot-%d", i))
	}
	for i := 0; i < s.cfg.ColdKeys; i++ {
		s.coldKeys = append(s.coldKeys, fmt.Sprintf("cold-%d", i))
	}
	for _, n := range s.nodes {
		for l := 0; l < s.cfg.Lockers; l++ {
			s.scheduleLock(n, time.Duration(s.rng.Int64N(int64(200*time.Millisecond))))
		}
	}
}

func (s *Sim) scheduleLock(n *simNode, after time.Duration) {
	if s.now.Add(after).After(simBase.Add(s.cfg.Duration - simLockStop)) {
		return
	}
	s.at(s.now.Add(after), s.newEvent(evLock, n.idx, n.gen))
}

func (s *Sim) lockStart(n *simNode, e *event) {
	var key string
	if s.cfg.ColdKeys == 0 {
		key = s.keyName(true, s.rng.IntN(s.cfg.HotKeys))
	} else {
		key = s.keyName(false, s.rng.IntN(s.cfg.ColdKeys))
		if s.rng.Float64() < 0.6 && s.cfg.HotKeys > 0 {
			key = s.keyName(true, s.rng.IntN(s.cfg.HotKeys))
		}
	}
	cs := &critical{key: key}
	var lease time.Duration
	if s.rng.IntN(3) == 0 {
		lease = 200*time.Millisecond + time.Duration(s.rng.Int64N(int64(800*time.Millisecond)))
	}
	wait := simWait + s.queueWait()
	// Now and then a long section, under faults and once healed: it keeps
	// its lock by renewal while others wait (held while alive). Its
	// waiters' deadlines cover a few of them.
	if s.rng.IntN(25) == 0 && s.longWindow() && s.longLockers() < maxLongLockers {
		cs.key, cs.long, lease, wait = longKey, true, 0, 12*time.Second
	}
	cs.lease = lease
	// A quarter of the lockers give way to a silent home. Drawn from the
	// side stream, so that the seeds' schedules stay what they were.
	if s.side.IntN(4) == 0 {
		cs.silentFor = 300*time.Millisecond + time.Duration(s.side.Int64N(int64(700*time.Millisecond)))
	}
	s.startLock(n, cs, wait)
}

// maxLongLockers bounds the long key's lockers, waiting or holding, so that
// its waiters' deadlines (12s) cover the sections ahead of them: otherwise
// in a long schedule every locker ends up queued on it, one in 25 locks at
// a time.
const maxLongLockers = 4

func (s *Sim) longLockers() int {
	k := 0
	for _, n := range s.nodes {
		if n.core == nil {
			continue // a crashed process's lockers are gone
		}
		for _, cs := range n.lockers {
			if cs.long {
				k++
			}
		}
	}
	return k
}

// queueWait is how long a lock may queue behind every node's lockers when
// the store hooks are slow (SimConfig.SlowHooks): two hooks a handoff. The
// workload's lockers wait that much longer than simWait, so that a lock
// queued behind slow handoffs does not time out (which I5 would take for no
// progress), and I5 requires progress only of locks started that long
// before the end. It is 0 with the default hooks.
func (s *Sim) queueWait() time.Duration {
	return time.Duration(len(s.nodes)*s.cfg.Lockers) * 2 * s.cfg.SlowHooks
}

// startLock makes cs one of n's lockers and has n lock cs.key for it, with
// cs.lease and a deadline wait from now; the workload, the targeted
// acquires (harsh.go) and the fixed schedules all start locks here.
func (s *Sim) startLock(n *simNode, cs *critical, wait time.Duration) {
	if n.closing {
		return // Lock fails with ErrClosed
	}
	n.nextID++
	cs.node, cs.gen, cs.locker, cs.started = n, n.gen, n.nextID, s.now
	n.lockers[cs.locker] = cs
	now := n.local(s.now)
	deadline := now.Add(wait)
	cs.deadline = deadline
	s.check.lockStarted(cs, n.trueAt(deadline))
	n.apply(s, n.core.Lock(now, cs.key, cs.locker, deadline, cs.lease, cs.silentFor))
}

func (s *Sim) onEvent(n *simNode, e delegation.Event) {
	switch e.Kind {
	case delegation.Admitted:
		cs := n.lockers[e.Locker]
		if cs == nil {
			return
		}
		cs.admitted, cs.token, cs.at, cs.expires = true, e.Token, s.now, e.Expires
		cs.signed = e.Signed
		cs.resolved = true
		s.trace("admit %s %s locker=%d %s until=%v", n.id, cs.key, cs.locker, cs.token, n.trueAt(e.Expires).Sub(simBase))
		s.check.admit(cs)
		s.checkSigned(cs)
		cs.read, cs.readOK = s.check.reg(cs.key).read(cs.token)
		d := 200*time.Microsecond + time.Duration(s.rng.Int64N(int64(3*time.Millisecond)))
		if s.rng.IntN(20) == 0 {
			d = time.Duration(s.rng.Int64N(int64(400 * time.Millisecond)))
		}
		if cs.long {
			d = simLease + time.Duration(s.rng.Int64N(int64(simLease*6/10)))
		}
		if cs.hold > 0 {
			d = cs.hold
		}
		ev := s.newEvent(evCSWrite, n.idx, n.gen)
		ev.cs = cs
		s.at(s.now.Add(d), ev)
	case delegation.Extended:
		if cs := n.lockers[e.Locker]; cs != nil {
			cs.expires = e.Expires
		}
	case delegation.Revoked:
		if cs := n.lockers[e.Locker]; cs != nil {
			s.trace("revoke %s %s locker=%d %s", n.id, cs.key, cs.locker, cs.token)
			s.check.revoked(cs, e)
			s.check.closeCS(cs)
			s.check.ended(cs)
		}
	case delegation.Failed:
		cs := n.lockers[e.Locker]
		if cs == nil {
			return
		}
		s.trace("fail %s %s locker=%d reason=%d %s", n.id, cs.key, cs.locker, e.Reason, e.Detail)
		if cs.silentFor > 0 && n.local(s.now).Before(cs.deadline) {
			s.faults["give_way"]++ // to a silent home
		}
		cs.resolved = true
		s.check.failed(cs, e)
		delete(n.lockers, cs.locker)
		if !cs.oneShot {
			// A client backs off before it asks again: a mixed-version
			// or gated cluster fails every lock at once.
			s.scheduleLock(n, simRetry+s.think())
		}
	case delegation.Settle, delegation.WaitFresh:
		if e.Kind == delegation.Settle && s.now.Before(s.healedAt) && s.rng.IntN(50) == 0 {
			s.faults["hook_hang"]++
			return // the store's hook never returns: the home waits the lease out
		}
		d := time.Duration(s.rng.Int64N(int64(2 * time.Millisecond)))
		if s.cfg.SlowHooks > 0 {
			d = s.cfg.SlowHooks
		}
		if e.Kind == delegation.Settle {
			// The barrier hook returns the replica's position when it ran.
			e.Barrier = barrierOf(n.storePos(e.Key))
		}
		ev := s.newEvent(evHook, n.idx, n.gen)
		ev.hook = e
		s.at(s.now.Add(d), ev)
	}
}

// longWindow: long sections start under faults (up to 10s before the end)
// and in a short window once the cluster settled, where they must keep
// their lock and hand it on at once.
func (s *Sim) longWindow() bool {
	end := simBase.Add(s.cfg.Duration)
	settled := s.check.settled()
	return s.now.Before(end.Add(-10*time.Second)) || (!s.now.Before(settled) && s.now.Before(settled.Add(500*time.Millisecond)))
}

func (s *Sim) think() time.Duration {
	return time.Millisecond + time.Duration(s.rng.Int64N(int64(30*time.Millisecond)))
}

// csWrite ends a critical section: the fenced write of read+1, then Unlock.
func (s *Sim) csWrite(n *simNode, cs *critical) {
	// The store refuses a commit under a revoked or expired handle
	// (Handle.Valid); the fence catches what that check cannot see.
	valid := !cs.closed && n.local(s.now).Before(cs.expires)
	if !valid {
		s.trace("commit refused, handle expired %s %s %s", n.id, cs.key, cs.token)
	}
	if cs.readOK && valid {
		if r := s.check.reg(cs.key); r.write(cs.token, cs.read+1) {
			n.storeAt(cs.key, r.version)
			s.indep.Wrote(cs.key, cs.token, r.version)
			s.check.acked(cs)
		} else {
			s.trace("stale write refused %s %s %s", n.id, cs.key, cs.token)
		}
	}
	if g := s.harsh.guard; g != nil && cs.readOK && !s.stopped {
		g.write(cs) // valid or not: the Guard decides by the token alone
	}
	if !cs.closed {
		// A revoked section stopped holding its key at the revocation
		// and was judged then: its holder may write (and be refused)
		// after the key has passed on.
		s.check.closeCS(cs)
		s.check.ended(cs)
	}
	delete(n.lockers, cs.locker)
	if rd, ok := n.core.Unlock(n.local(s.now), cs.key, cs.locker); ok {
		n.apply(s, rd)
	}
	if !cs.oneShot {
		s.scheduleLock(n, s.think())
	}
}

func (s *Sim) hookDone(n *simNode, e delegation.Event) {
	now := n.local(s.now)
	switch e.Kind {
	case delegation.Settle:
		n.apply(s, n.core.Settled(now, e.Key, e.Token, e.Barrier, nil))
	case delegation.WaitFresh:
		n.storeAt(e.Key, lockcheck.DecimalPosition(e.Barrier))
		n.apply(s, n.core.Fresh(now, e.Key, e.Token, nil))
	}
}

// register is a fenced read-modify-write register: reads and writes carry a
// token, and one below the highest seen is refused (the resource's check).
type register struct {
	value   int
	highest fence.Token
	version int
}

func (r *register) read(t fence.Token) (int, bool) {
	if t.Less(r.highest) {
		return 0, false
	}
	r.highest = t
	return r.value, true
}

func (r *register) write(t fence.Token, v int) bool {
	if t.Less(r.highest) {
		return false
	}
	r.highest, r.value = t, v
	r.version++
	return true
}
