package clustertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/internal/simtest/lockcheck"
	"github.com/homelock/homelock/msg"
)

// Protocol timings of simulated nodes, in virtual time.
const (
	simRetry      = 50 * time.Millisecond
	simLease      = time.Second
	simMinUseful  = 50 * time.Millisecond
	simEpochLease = 3 * time.Second
	simSkew       = 150 * time.Millisecond
	simDrift      = 0.01
	simPromise    = time.Second
)

var simBase = time.Unix(1_000_000, 0)

// simJumpAfter is the lease clock lag a node must notice (H9): the design's
// Skew less the drift (docs/design.md, "Clock jumps"). The checkers allow a
// stall under it to lengthen a liveness.
var simJumpAfter = time.Duration(float64(simSkew) * (1 - simDrift))

// Sim is one simulated cluster: nodes running the real state machines, a
// hostile network, a workload and the invariant checkers, all driven by one
// seeded RNG and virtual time.
type Sim struct {
	cfg SimConfig
	rng *rand.Rand
	// side is for draws added after the seeds were pinned down (docs and
	// fixed seeds quote them): the main stream, and so every seed's
	// faults and workload, stays as it was.
	side  *rand.Rand
	now   time.Time // true time
	queue simtest.Queue[*event]

	nodes []*simNode
	net   network
	check *checker
	indep *lockcheck.Checker

	faults map[string]int
	// signedTokens are the delegations the homes signed (sign).
	signedTokens map[fence.Token]bool
	nEvents      int
	hash         uint64
	recent       []traceRec
	recentAt     int
	stopped      bool
	healedAt     time.Time
	// downAfter is this seed's failure-detection delay; below the lease it
	// removes homes whose delegations still run, which is what gates are for.
	downAfter time.Duration

	hotKeys, coldKeys []string
	// version is the protocol version nodes run (or are being upgraded to).
	version uint32

	// free holds dispatched events for reuse: a seed allocates thousands,
	// each a few hundred bytes, and the collector was a third of a run.
	free []*event

	// blackout cuts a node's gossip (only) while set.
	blackout map[int]bool
	// reach backs reachable (gossip.go).
	reach [][]bool
	// heal is the healing check's bookkeeping (healing.go).
	heal healing
	// harsh is the targeted faults' state (harsh.go).
	harsh harsh
}

type eventKind uint8

const (
	evDeliver eventKind = iota + 1
	evTick
	evLock
	evCSWrite
	evHook
	evFault
)

type event struct {
	at   time.Time
	seq  uint64
	kind eventKind
	node int
	env  msg.Envelope
	// gen invalidates a node's events across a crash (its process is gone).
	gen  uint64
	cs   *critical
	hook delegation.Event
	run  func()
}

func (s *Sim) at(t time.Time, e *event) {
	e.at = t
	e.seq = s.queue.Push(t.UnixNano(), e)
}

// After runs f at virtual offset d from now (scripts use it).
func (s *Sim) After(d time.Duration, f func()) {
	e := s.newEvent(evFault, 0, 0)
	e.run = f
	s.at(s.now.Add(d), e)
}

// newEvent is a zeroed event, reused from one already dispatched when
// there is one. An event built with &event{} is as good (run recycles it).
func (s *Sim) newEvent(kind eventKind, node int, gen uint64) *event {
	var e *event
	if k := len(s.free); k > 0 {
		e = s.free[k-1]
		s.free = s.free[:k-1]
	} else {
		e = new(event)
	}
	e.kind, e.node, e.gen = kind, node, gen
	return e
}

func newSim(cfg SimConfig) *Sim {
	if cfg.Nodes < 1 {
		cfg.Nodes = 3
	}
	s := &Sim{
		cfg:    cfg,
		rng:    newRand(cfg.Seed),
		side:   newRand(cfg.Seed ^ 0x5ca1ab1e),
		now:    simBase,
		faults: make(map[string]int),
		hash:   14695981039346656037,

		signedTokens: make(map[fence.Token]bool),
	}
	s.downAfter = 200*time.Millisecond + time.Duration(s.rng.Int64N(int64(time.Second)))
	s.version = 1
	s.check = newChecker(s)
	s.indep = lockcheck.New(lockcheck.World{
		Now:  func() time.Time { return s.now },
		Node: func(i int) lockcheck.Node { return s.nodes[i] },
		ByID: func(id msg.NodeID) lockcheck.Node {
			if n := s.nodeByID(id); n != nil {
				return n
			}
			return nil
		},
		Fail: s.check.fail,
		Base: simBase, Skew: simSkew, EpochLease: simEpochLease, Retry: simRetry, Drift: simDrift,
	})
	s.net = newNetwork()
	s.blackout = make(map[int]bool)
	s.recent = make([]traceRec, 0, recentEvents)
	var initial []msg.NodeID
	for i := 0; i < cfg.Nodes; i++ {
		n := s.addNode(i)
		initial = append(initial, n.id)
	}
	// Every initial node is given the others' gossip addresses, as the
	// README's --initial ID=ADDR list does, by name (seedName).
	for _, n := range s.nodes {
		for _, o := range s.nodes {
			if o != n {
				n.seeds = append(n.seeds, seedName(o))
			}
		}
		n.start(s, initial)
	}
	s.After(0, s.gossipTick)
	s.healedAt = simBase.Add(time.Duration(float64(cfg.Duration) * cfg.FaultFraction))
	s.heal.from = s.healedAt
	s.startWorkload()
	if cfg.Script != nil {
		cfg.Script(s)
		s.at(s.healedAt, &event{kind: evFault, run: s.healAll})
	} else {
		s.scheduleFaults()
	}
	return s
}

// addNode creates node i with its own clock (offset and rate within the
// drift bound) and an empty disk.
func (s *Sim) addNode(i int) *simNode {
	version := max(s.version, 1)
	if i < len(s.cfg.Versions) {
		version = s.cfg.Versions[i]
	}
	n := &simNode{
		idx: i,
		id:  msg.NodeID(fmt.Sprintf("n%d", i+1)),
	}
	rate := s.clockRate()
	n.clock = simtest.NewClock(simBase, time.Duration(s.rng.Int64N(int64(time.Hour))), rate)
	n.disk.Disk = simtest.NewDisk[epoch.AcceptorRecord, epoch.Learned](s.rng.Uint64() | 1)
	n.member = msg.Member{ID: n.id, Store: n.disk.Store, Addr: string(n.id), Version: version}
	s.nodes = append(s.nodes, n)
	return n
}

func (s *Sim) run() {
	end := simBase.Add(s.cfg.Duration)
	for s.queue.Len() > 0 && !s.stopped {
		_, e := s.queue.Pop()
		if e.at.After(end) {
			break
		}
		s.now = e.at
		s.nEvents++
		if !s.dispatch(e) {
			*e = event{}
			s.free = append(s.free, e)
		}
	}
	if !s.stopped {
		s.check.final()
	}
	if !s.stopped {
		s.finalHealing()
	}
}

// dispatch carries out e; it reports whether e is kept (deferred by a
// paused process), so that run does not reuse it.
func (s *Sim) dispatch(e *event) (kept bool) {
	switch e.kind {
	case evFault:
		e.run()
		return false
	}
	n := s.nodes[e.node]
	if n.core == nil || e.gen != n.gen {
		return false // the process that scheduled it is gone
	}
	if n.paused {
		n.deferred = append(n.deferred, e)
		return true
	}
	if e.kind != evTick { // a tick reads the clocks itself
		// Every driver step reads its clocks and judges a jump first
		// (Node.stepNow): without these readings a node with no tick due
		// for an EpochLease before a suspend kept none in the core's
		// look-back window and took no jump on resume (seed 8,007,110 over
		// a minute: E2). A jump's Ready crashes nothing at once (crashes
		// are scheduled), so the node still runs.
		n.observeClocks(s)
	}
	switch e.kind {
	case evDeliver:
		s.traceDeliver(e.env.From.ID, n.id, e.env.Body)
		if w, ok := e.env.Body.(msg.Wait); ok {
			s.check.receivedWait(n.id, w)
		}
		n.apply(s, n.core.Receive(n.local(s.now), e.env))
	case evTick:
		if e.seq != n.tickSeq {
			return
		}
		n.tickSeq = 0
		n.tick(s)
	case evLock:
		s.lockStart(n, e)
	case evCSWrite:
		s.csWrite(n, e.cs)
	case evHook:
		s.hookDone(n, e.hook)
	}
	return false
}

// send puts one message on the network: dropped, duplicated, delayed or
// held by a partition as the current faults say.
func (s *Sim) send(from *simNode, o core.Outgoing) {
	if a, ok := o.Env.Body.(msg.Acquire); ok {
		s.check.sentAcquire(from.id, a)
	}
	to := s.nodeByAddr(o.To.Addr)
	if to == nil {
		return
	}
	if f := s.cfg.Filter; f != nil && s.now.Before(s.healedAt) && !f(from.id, to.id, o.Env) {
		s.faults["filtered"]++
		return
	}
	if s.keepOld(from, to, o.Env) {
		return // detained: it arrives late (harsh.go)
	}
	if s.net.Blocked(from.idx, to.idx) {
		s.faults["partition_drop"]++
		return
	}
	copies := s.net.Fate(s.rng)
	switch copies {
	case 0:
		s.faults["drop"]++
		return
	case 2:
		s.faults["duplicate"]++
	}
	for c := 0; c < copies; c++ {
		d := s.net.Delay.Draw(s.rng)
		if d > 5*time.Millisecond {
			s.faults["delay"]++
		}
		e := s.newEvent(evDeliver, to.idx, to.gen)
		e.env = o.Env
		s.at(s.now.Add(d), e)
	}
}

// nodeByAddr routes by transport address, as gRPC does: an impostor under
// an existing node ID has an address of its own.
func (s *Sim) nodeByAddr(addr string) *simNode {
	for _, n := range s.nodes {
		if n.member.Addr == addr {
			return n
		}
	}
	return nil
}

func (s *Sim) nodeByID(id msg.NodeID) *simNode {
	for _, n := range s.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

const recentEvents = 80

// traceRec is one event as the trace keeps it: formatted only when a report
// or a replay needs the line, since formatting every event would dominate a
// run's cost.
type traceRec struct {
	at     time.Time
	format string
	args   []any
	// A delivery, the commonest event, keeps its fields unboxed (args nil).
	from, to msg.NodeID
	body     msg.Body
}

func (r traceRec) String() string {
	args := r.args
	if r.format == deliverFormat {
		args = []any{r.from, r.to, described{r.body}}
	}
	return fmt.Sprintf("%9.4fs "+r.format, append([]any{r.at.Sub(simBase).Seconds()}, args...)...)
}

const deliverFormat = "deliver %s->%s %v"

// traceDeliver is trace(deliverFormat, from, to, described{body}), with the
// same hash, without boxing its arguments.
func (s *Sim) traceDeliver(from, to msg.NodeID, body msg.Body) {
	h := s.hash*1099511628211 ^ uint64(s.now.UnixNano())
	h = mixString(h, deliverFormat)
	h = mixString(h, string(from))
	h = mixString(h, string(to))
	s.hash = mixUint(h, uint64(body.Kind()))
	s.keep(traceRec{at: s.now, format: deliverFormat, from: from, to: to, body: body})
}

// trace hashes every event (same seed, same trace) and keeps the last few.
func (s *Sim) trace(format string, args ...any) {
	h := s.hash*1099511628211 ^ uint64(s.now.UnixNano())
	h = mixString(h, format)
	for _, a := range args {
		h = mixArg(h, a)
	}
	s.hash = h
	s.keep(traceRec{at: s.now, format: format, args: args})
}

// keep adds rec to the trace: all of it with SimConfig.Trace, otherwise a
// ring of the last recentEvents.
func (s *Sim) keep(rec traceRec) {
	if s.cfg.Trace || len(s.recent) < recentEvents {
		s.recent = append(s.recent, rec)
		return
	}
	s.recent[s.recentAt] = rec
	s.recentAt = (s.recentAt + 1) % recentEvents
}

func mixString(h uint64, v string) uint64 {
	for i := 0; i < len(v); i++ {
		h = (h ^ uint64(v[i])) * 1099511628211
	}
	return h
}

func mixUint(h, v uint64) uint64 { return (h ^ v) * 1099511628211 }

func mixArg(h uint64, a any) uint64 {
	switch v := a.(type) {
	case string:
		return mixString(h, v)
	case msg.NodeID:
		return mixString(h, string(v))
	case int:
		return mixUint(h, uint64(v))
	case uint64:
		return mixUint(h, v)
	case fence.Token:
		return mixUint(mixUint(mixUint(h, v.Epoch), v.Incarnation), v.Counter)
	case time.Duration:
		return mixUint(h, uint64(v))
	case described:
		return mixUint(h, uint64(v.b.Kind()))
	case msg.Body:
		return mixUint(h, uint64(v.Kind()))
	default:
		return mixString(h, fmt.Sprint(v))
	}
}

func (s *Sim) lastEvents() []string {
	recs := s.recent
	if !s.cfg.Trace && len(s.recent) == recentEvents {
		recs = append(slices.Clone(s.recent[s.recentAt:]), s.recent[:s.recentAt]...)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.String()
	}
	return out
}

func (s *Sim) result() Result {
	r := Result{
		Seed:       s.cfg.Seed,
		Violations: s.check.violations,
		Faults:     s.faults,
		Admissions: s.check.admissions,
		Acks:       s.check.acks,
		Events:     s.nEvents,
		TraceHash:  s.hash,

		HealedAfter: -1,
		Epochs:      s.heal.maxEpoch,
		EpochBudget: s.heal.budget,
		Config:      s.cfg,
	}
	if !s.heal.at.IsZero() {
		r.HealedAfter = s.heal.at.Sub(s.heal.from)
	}
	if r.Failed() || s.cfg.Trace {
		r.Trace = s.lastEvents()
	}
	return r
}

// described formats a message body lazily for the trace.
type described struct{ b msg.Body }

func (d described) String() string { return describe(d.b) }

func describe(b msg.Body) string {
	switch m := b.(type) {
	case msg.Acquire:
		return fmt.Sprintf("acquire %s req=%v#%d queued=%v", m.Key, m.Req, m.Attempt, m.Queued)
	case msg.Grant:
		return fmt.Sprintf("grant %s %s req=%v#%d lease=%v recalled=%v contended=%v", m.Key, m.Token, m.Req, m.Attempt, m.Lease, m.Recalled, m.Contended)
	case msg.Release:
		return fmt.Sprintf("release %s %s", m.Key, m.Token)
	case msg.Recall:
		return fmt.Sprintf("recall %s %s", m.Key, m.Token)
	case msg.Renew:
		return fmt.Sprintf("renew %s %s #%d", m.Key, m.Token, m.Attempt)
	case msg.RenewReply:
		return fmt.Sprintf("renew_reply %s %s #%d ok=%v", m.Key, m.Token, m.Attempt, m.OK)
	case msg.Learn:
		return fmt.Sprintf("learn e%d %v", m.Epoch.Number, memberIDs(m.Epoch))
	case msg.Drained:
		if l := m.Live; l != nil {
			return fmt.Sprintf("drained %s %d->%d live=%s holder=%s", m.Key, m.From, m.To, l.Token, l.Holder.ID)
		}
		return fmt.Sprintf("drained %s %d->%d", m.Key, m.From, m.To)
	case msg.DrainQuery:
		return fmt.Sprintf("drain_query %s %d->%d", m.Key, m.From, m.To)
	case msg.Wait:
		return fmt.Sprintf("wait %s req=%v reason=%d", m.Key, m.Req, m.Reason)
	case msg.Withdraw:
		return fmt.Sprintf("withdraw %s req=%v", m.Key, m.Req)
	case msg.NotHome:
		return fmt.Sprintf("not_home %s req=%v", m.Key, m.Req)
	case msg.Refused:
		return fmt.Sprintf("refused %s req=%v reason=%d", m.Key, m.Req, m.Reason)
	}
	return b.Kind().String()
}

func memberIDs(e msg.Epoch) []msg.NodeID {
	ids := make([]msg.NodeID, len(e.Members))
	for i, m := range e.Members {
		ids[i] = m.ID
	}
	return ids
}
