package clustertest

import (
	"maps"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// simNode is one simulated process and its disk.
type simNode struct {
	idx    int
	id     msg.NodeID
	member msg.Member
	// clock is the node's clock (offset and rate within the drift bound).
	clock simtest.Clock
	// stalls are the suspends this clock missed (harsh.go): empty but
	// for clock-jump schedules.
	stalls []clockStall
	// stallFrom is when the suspend its clock misses began, while one
	// lasts (zero otherwise), and stallUntil when its own timer ends it.
	stallFrom, stallUntil time.Time
	// lastRead is its lease clock's last reading by a timer step.
	lastRead time.Time

	disk disk
	core *core.Node
	// gen is bumped by a crash; events of an earlier process are ignored.
	gen uint64
	// moves counts the restarts that came up at another address.
	moves    int
	paused   bool
	deferred []*event
	tickSeq  uint64
	tickAt   time.Time
	// removed: not in its epoch as it runs (the core says, each gossip
	// tick); the progress checks leave such a node out.
	removed bool
	// gone: refused as a duplicate node ID; the process exited for good.
	gone bool
	// view is this process's memberlist view (gossip.go); seeds are its
	// configured gossip seeds (Config.Join).
	view  []*gossipEntry
	seeds []string
	// viewBuf backs coreView; gossip caches gossipAddr (of gossipOf).
	viewBuf          []core.GossipPeer
	gossip, gossipOf string

	// closing: Close runs (closeThenRestart); no new locker starts.
	closing bool
	lockers map[uint64]*critical
	nextID  uint64
	// store is the node's store's replica position per key (barriers.go);
	// it survives a crash, as the store does.
	store map[string]int
}

// String names the node in violations.
func (n *simNode) String() string { return string(n.id) }

// The independent checker's view of the node (lockcheck.Node).
func (n *simNode) Name() msg.NodeID             { return n.id }
func (n *simNode) Index() int                   { return n.idx }
func (n *simNode) Gen() uint64                  { return n.gen }
func (n *simNode) Running() bool                { return n.core != nil }
func (n *simNode) Local(t time.Time) time.Time  { return n.local(t) }
func (n *simNode) TrueAt(l time.Time) time.Time { return n.trueAt(l) }
func (n *simNode) Inc() uint64                  { return n.disk.Inc }
func (n *simNode) Learned() *epoch.Learned      { return n.disk.Learned() }
func (n *simNode) Version() uint32              { return n.member.Version }

// disk is what survives a crash: only what a Ready asked to sync.
type disk struct {
	simtest.Disk[epoch.AcceptorRecord, epoch.Learned]
	// known are the members' gossip addresses the core asked to keep.
	known map[msg.NodeID]string
}

// local and trueAt convert between true time and n's clock, which skips
// the suspends it missed (harsh.go).
func (n *simNode) local(t time.Time) time.Time {
	if len(n.stalls) > 0 {
		return n.stalledLocal(t)
	}
	return n.clock.Local(t)
}

func (n *simNode) trueAt(l time.Time) time.Time {
	if len(n.stalls) > 0 {
		return n.stalledTrueAt(l)
	}
	return n.clock.True(l)
}

// state is what a restart loads from the disk.
func (d *disk) state() epoch.State {
	st := epoch.State{Acceptor: d.Acceptors()}
	if l := d.Learned(); l != nil {
		c := *l
		st.Learned = &c
	}
	return st
}

func (s *Sim) nodeConfig(n *simNode) core.Config {
	lease := simLease
	if s.cfg.Lease > 0 {
		lease = s.cfg.Lease
	}
	return core.Config{
		Observe: func(env msg.Envelope, sent bool) {
			s.indep.Observe(n, env, sent)
			if sent {
				s.check.sending(n, env)
			}
		},
		Self: n.member,
		Inc:  n.disk.Inc,
		Epoch: epoch.Config{
			EpochLease:     simEpochLease,
			MaxDrift:       simDrift,
			RetryInterval:  simRetry,
			PromiseTimeout: simPromise,
			Rand:           newRand(s.rng.Uint64()),
			Mutations:      s.cfg.Mutations.Epoch,
		},
		Home: home.Config{
			EpochLease:    simEpochLease,
			Skew:          simSkew,
			MaxLease:      lease,
			MinUseful:     simMinUseful,
			RetryInterval: simRetry,
			MaxWaiters:    64,
			Sign:          s.sign,
			Mutations:     s.cfg.Mutations.Home,
		},
		Holder: delegation.Config{
			MaxDrift:      simDrift,
			MinUseful:     simMinUseful,
			RetryInterval: simRetry,
			Lease:         lease,
			Mutations:     s.cfg.Mutations.Holder,
		},
		Members: core.MembersPacing(simRetry, s.downAfter),
	}
}

// start boots the node's process: bump the incarnation (synced, unless the
// mutation forgets it), restore from disk, and bootstrap (initial: the first
// epoch's node IDs) or, with no epoch on disk, join through its seeds. The
// rest is the core's: gossip rejoins, the restart gate, joins.
func (n *simNode) start(s *Sim, initial []msg.NodeID) {
	if !s.cfg.Mutations.incarnationNotPersisted() || n.disk.Inc == 0 {
		n.disk.Inc++
	}
	n.gen++
	n.paused, n.closing = false, false
	n.deferred = nil
	n.view = nil
	n.lockers = make(map[uint64]*critical)
	now := n.local(s.now)
	st := n.disk.state()
	marker := st.Learned != nil && n.disk.Markers[st.Learned.Epoch.Number]
	cfg := s.nodeConfig(n)
	cfg.Members.Seeds = n.seeds
	cfg.Members.Known = maps.Clone(n.disk.known)
	if n.disk.Inc > 1 {
		cfg.Members.RejoinAfter = now.Add(simEpochLease + simSkew)
	}
	n.core = core.New(cfg, now, st, marker)
	s.trace("start %s inc=%d epoch=%v", n.id, n.disk.Inc, learnedNumber(st.Learned))
	switch {
	case initial != nil:
		n.core.StartBootstrap(initial)
	case st.Learned == nil:
		n.core.WantJoin()
	}
	n.core.ObserveClocks(time.Time{}, now, s.now) // the first reading, as Open takes it
	n.apply(s, n.core.Tick(now))
}

// tick is the driver's timer step: the clocks read (a jump taken first),
// then the machines ticked. The wall clock is true time: only the lease
// clock drifts, and only it stands still in a suspend it misses.
func (n *simNode) tick(s *Sim) {
	n.observeClocks(s)
	if n.core != nil {
		n.apply(s, n.core.Tick(n.local(s.now)))
	}
}

// observeClocks reads the lease clock between two readings of the wall
// clock, as the driver does on every timer step, and lets the core judge a
// jump (core.ObserveClocks).
func (n *simNode) observeClocks(s *Sim) {
	now := n.local(s.now)
	if now.Before(n.lastRead) {
		s.check.fail(invClockModel, "%s's lease clock read %v, %v before its last reading", n.id, now.Sub(simBase), n.lastRead.Sub(now))
	}
	n.lastRead = now
	r, ahead := n.core.ObserveClocks(s.now, now, s.now)
	if ahead > 0 {
		s.trace("clock jump %s", n.id)
		s.indep.ClockJumped(n)
		n.apply(s, r)
	}
}

func learnedNumber(l *epoch.Learned) any {
	if l == nil {
		return "none"
	}
	return l.Epoch.Number
}

// apply carries out a Ready: sync writes, send messages, deliver events, and
// arm the next tick.
func (n *simNode) apply(s *Sim, rd core.Ready) {
	s.indep.Synced(n, rd.Acceptor)
	s.indep.Step(n, rd.Learned, rd.Events)
	for _, r := range rd.Acceptor {
		if !s.cfg.Mutations.acceptorNotPersisted() {
			n.disk.SyncAcceptor(r.Instance, r)
		}
	}
	if rd.Learned != nil && !s.cfg.Mutations.learnedNotPersisted() {
		n.disk.SyncLearned(*rd.Learned)
		n.disk.Prune(rd.Learned.Epoch.Number)
	}
	if rd.Learned != nil {
		s.check.learned(n, *rd.Learned)
		s.noteEpochNumber(rd.Learned.Epoch.Number)
	}
	for _, g := range rd.GatePassed {
		n.disk.Markers[g] = true
	}
	for _, o := range rd.Msgs {
		s.send(n, o)
	}
	s.check.live(n)
	s.carryMembership(n, rd)
	for _, e := range rd.Events {
		s.onEvent(n, e)
	}
	s.check.settleRenews(n)
	n.armTick(s)
	if len(rd.Acceptor) > 0 && s.now.Before(s.healedAt) && s.cfg.Script == nil && s.rng.IntN(8) == 0 {
		// Crash right after a promise or acceptance left: what it wrote
		// must have been synced, or the restarted acceptor forgets it.
		s.faults["crash_after_promise"]++
		s.budget(2)
		s.After(0, func() {
			s.crash(n)
			s.After(50*time.Millisecond+time.Duration(s.rng.Int64N(int64(400*time.Millisecond))), func() { s.restart(n) })
		})
	}
}

func (n *simNode) armTick(s *Sim) {
	d := n.core.NextDeadline()
	if d.IsZero() {
		return
	}
	at := n.trueAt(d)
	if at.Before(s.now) {
		at = s.now
	}
	at = at.Add(time.Microsecond)
	// Keep the earliest pending tick; a later one replaces nothing.
	if n.tickSeq != 0 && !at.Before(n.tickAt) {
		return
	}
	e := s.newEvent(evTick, n.idx, n.gen)
	s.at(at, e)
	n.tickSeq, n.tickAt = e.seq, at
}

// crash ends the process: volatile state is gone, the disk stays.
func (s *Sim) crash(n *simNode) {
	if n.core == nil {
		return
	}
	s.faults["crash"]++
	s.trace("crash %s", n.id)
	s.check.crashed(n)
	n.core = nil
	n.gen++
	n.paused = false
	n.stallFrom = time.Time{}
	n.deferred = nil
	n.tickSeq = 0
}

// wipe gives crashed node n an empty disk under a new store ID: started
// again, it is a new member under its old node ID (H17, H21, H25). The
// node's replica of the example store is not homelock's data directory and
// stays.
func (s *Sim) wipe(n *simNode, store uint64) {
	if n.core != nil {
		return
	}
	s.faults["wipe"]++
	s.budget(2) // the new store's join, and the old one's removal if it comes first
	n.disk.Wipe(store)
	n.disk.known = nil
	n.member.Store = n.disk.Store
	s.check.agree.Forget(n)
	s.trace("wipe %s store=%x", n.id, store)
}

// restart starts a crashed node again, with no seed: it finds the cluster
// as a restarted process does, from the gossip addresses it kept.
func (s *Sim) restart(n *simNode) {
	if n.core != nil || n.gone {
		return
	}
	s.faults["restart"]++
	n.start(s, nil)
	s.scheduleLockers(n) // its clients lock again
}

func (s *Sim) pause(n *simNode) {
	if n.core == nil || n.paused {
		return
	}
	s.faults["pause"]++
	s.trace("pause %s", n.id)
	n.paused = true
}

func (s *Sim) resume(n *simNode) {
	if !s.resuming(n) {
		return
	}
	s.trace("resume %s", n.id)
	n.paused = false
	d := n.deferred
	n.deferred = nil
	n.tickSeq = 0 // a deferred tick is re-queued under a new sequence number
	for _, e := range d {
		if e.kind != evTick {
			s.at(s.now, e)
		}
	}
	if n.core != nil {
		n.tick(s)
	}
}

func (s *Sim) someLiveMember(except *simNode) *simNode {
	for _, m := range s.nodes {
		if m != except && m.core != nil && !m.removed && !m.gone {
			return m
		}
	}
	return nil
}
