package clustertest

import (
	"maps"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// simNode is one simulated process and its disk.
type simNode struct {
	idx    int
	id     msg.NodeID
	member msg.Member
	// The node's clock: local = base + offset + (true − base) × rate. It keeps
	// counting while the process is paused or down, like CLOCK_BOOTTIME.
	rate   float64
	offset time.Duration
	// stalls are the suspends this clock missed (clockjump.go): empty but
	// for clock-jump schedules.
	stalls []clockStall

	disk disk
	core *core.Node
	// gen is bumped by a crash; events of an earlier process are ignored.
	gen      uint64
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

	lockers map[uint64]*critical
	nextID  uint64
	// store is the node's store's replica position per key (barriers.go);
	// it survives a crash, as the store does.
	store map[string]int
}

// disk is what survives a crash: only what a Ready asked to sync.
type disk struct {
	store    uint64
	inc      uint64
	acceptor map[uint64]epoch.AcceptorRecord
	learned  *epoch.Learned
	markers  map[uint64]bool
	// known are the members' gossip addresses the core asked to keep.
	known map[msg.NodeID]string
}

// local and trueAt convert between true time and n's clock. They work in
// Unix nanoseconds: time.Time.Sub checks for overflow with an Add and an
// Equal, and these run several times per event. The results are those of
// simBase.Add(...) with t.Sub(simBase), for any time within centuries.
func (n *simNode) local(t time.Time) time.Time {
	if len(n.stalls) > 0 {
		return n.stalledLocal(t)
	}
	return time.Unix(0, simBaseNano+int64(n.offset)+int64(float64(t.UnixNano()-simBaseNano)*n.rate))
}

func (n *simNode) trueAt(l time.Time) time.Time {
	if len(n.stalls) > 0 {
		return n.stalledTrueAt(l)
	}
	return time.Unix(0, simBaseNano+int64(float64(l.UnixNano()-simBaseNano-int64(n.offset))/n.rate))
}

func (d *disk) state() epoch.State {
	st := epoch.State{}
	for _, i := range deadline.SortedKeys(d.acceptor) {
		st.Acceptor = append(st.Acceptor, d.acceptor[i])
	}
	if d.learned != nil {
		l := *d.learned
		st.Learned = &l
	}
	return st
}

func (s *Sim) nodeConfig(n *simNode) core.Config {
	lease := simLease
	if s.cfg.Lease > 0 {
		lease = s.cfg.Lease
	}
	return core.Config{
		Observe: func(env msg.Envelope, sent bool) { s.indep.observe(n, env, sent) },
		Self:    n.member,
		Inc:     n.disk.inc,
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
	if !s.cfg.Mutations.incarnationNotPersisted() || n.disk.inc == 0 {
		n.disk.inc++
	}
	n.gen++
	n.paused = false
	n.deferred = nil
	n.view = nil
	n.lockers = make(map[uint64]*critical)
	now := n.local(s.now)
	st := n.disk.state()
	marker := st.Learned != nil && n.disk.markers[st.Learned.Epoch.Number]
	cfg := s.nodeConfig(n)
	cfg.Members.Seeds = n.seeds
	cfg.Members.Known = maps.Clone(n.disk.known)
	if n.disk.inc > 1 {
		cfg.Members.RejoinAfter = now.Add(simEpochLease + simSkew)
	}
	n.core = core.New(cfg, now, st, marker)
	s.trace("start %s inc=%d epoch=%v", n.id, n.disk.inc, learnedNumber(st.Learned))
	switch {
	case initial != nil:
		n.core.StartBootstrap(initial)
	case st.Learned == nil:
		n.core.WantJoin()
	}
	n.apply(s, n.core.Tick(now))
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
	s.indep.accepts.synced(n, rd.Acceptor)
	s.indep.step(n, rd.Learned, rd.Events)
	for _, r := range rd.Acceptor {
		if !s.cfg.Mutations.acceptorNotPersisted() {
			n.disk.acceptor[r.Instance] = r
		}
	}
	if rd.Learned != nil && !s.cfg.Mutations.learnedNotPersisted() {
		l := *rd.Learned
		n.disk.learned = &l
		for i := range n.disk.acceptor {
			if i <= l.Epoch.Number {
				delete(n.disk.acceptor, i)
			}
		}
	}
	if rd.Learned != nil {
		s.check.learned(n, *rd.Learned)
		s.noteEpochNumber(rd.Learned.Epoch.Number)
	}
	for _, g := range rd.GatePassed {
		n.disk.markers[g] = true
	}
	for _, o := range rd.Msgs {
		s.check.sent(n, o)
		s.send(n, o)
	}
	s.carryMembership(n, rd)
	for _, e := range rd.Events {
		s.onEvent(n, e)
	}
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
	n.deferred = nil
	n.tickSeq = 0
}

// restart starts a crashed node again, with no seed: it finds the cluster
// as a restarted process does, from the gossip addresses it kept.
func (s *Sim) restart(n *simNode) {
	if n.core != nil || n.gone {
		return
	}
	s.faults["restart"]++
	n.start(s, nil)
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
	if n.core == nil || !n.paused {
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
		n.apply(s, n.core.Tick(n.local(s.now)))
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
