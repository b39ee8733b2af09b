package epoch

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// The seeded network simulator: 3–5 machines (plus joiners) under one
// *rand.Rand that drives message drop, duplication, reordering and delay,
// clock drift within MaxDrift, crash/restart (keeping only what each step
// returned in Output.Acceptor/Learned, persisted before its messages are
// sent), wiped disks rejoining under the old node ID (H17, H21), and
// concurrent proposers (joins, leaves, removals sent to several members).
//
// Checked after every step:
//   - E1: no two different epochs are learned for one number anywhere;
//     a node's learned number only grows (also across restarts); every
//     learned epoch carries a certificate valid against the epoch chosen
//     before it.
//   - H10: no message leaves under an epoch that is not yet durable.
//   - E2: every liveness granted for epoch n (LiveUntil on a drifting clock,
//     converted to true time) ends by learnedAt(n+1) + EpochLease, where
//     learnedAt(n+1) is the first true instant anyone learned n+1.

var (
	flagSeeds = flag.Int("epoch.seeds", 1000, "number of simulator seeds TestSimAgreement runs")
	flagSeed  = flag.Uint64("epoch.seed", 0, "replay this one simulator seed (with -v for its trace)")
)

var simCfg = Config{
	EpochLease:     1500 * time.Millisecond,
	MaxDrift:       0.01,
	RetryInterval:  40 * time.Millisecond,
	PromiseTimeout: 400 * time.Millisecond,
}

var simBase = time.Unix(1_700_000_000, 0)

// simOpts is a seed's fault regime; newSim draws it from the seed so that
// 1,000 seeds cover calm networks, lossy ones and crash storms.
type simOpts struct {
	duration   time.Duration // faults and actions stop at 70% of it
	dropP      float64
	dupP       float64
	crashEvery time.Duration // mean time between crashes (cluster-wide)
	// crashAfterWriteP: after a step that answered Prepare or Accept, crash
	// the node a moment later (its answer already left): the durability
	// boundary, where a forgotten promise or acceptance shows.
	crashAfterWriteP float64
	contention       int // simultaneous conflicting removals per burst
	maxDelay         time.Duration
	// partitions: how many times some directed links are cut for a while
	// (A and B cannot talk, both reach C: the shape forks need).
	partitions int
}

func drawOpts(r *rand.Rand) simOpts {
	o := simOpts{duration: 8 * time.Second}
	o.dropP = []float64{0, 0.05, 0.15, 0.3}[r.IntN(4)]
	o.dupP = []float64{0, 0.05, 0.2}[r.IntN(3)]
	o.crashEvery = []time.Duration{300 * time.Millisecond, 700 * time.Millisecond, 2 * time.Second}[r.IntN(3)]
	o.crashAfterWriteP = []float64{0, 0.02, 0.1}[r.IntN(3)]
	o.contention = 1 + r.IntN(4)
	o.maxDelay = 15 * time.Millisecond
	o.partitions = r.IntN(6)
	return o
}

type simNode struct {
	cfg     Config
	m       *Machine
	up      bool
	initial bool
	clock   simtest.Clock
	disk    disk // what was synced: the only thing a restart keeps
	tickGen int
	joinAt  int64
}

// durable is the number of the learned epoch n synced, -1 for none.
func (n *simNode) durable() int64 {
	if l := n.disk.Learned(); l != nil {
		return int64(l.Epoch.Number)
	}
	return -1
}

type evKind uint8

const (
	evDeliver evKind = iota
	evTick
	evCrash
	evRestart
	evAction
)

type event struct {
	at   int64
	kind evKind
	node msg.NodeID
	gen  int
	env  msg.Envelope
	act  func()
}

type traceLine struct {
	at   int64
	node msg.NodeID
	what string
	env  *msg.Envelope
}

type sim struct {
	seed  uint64
	opts  simOpts
	rng   *rand.Rand
	now   int64
	q     simtest.Queue[*event]
	nodes map[msg.NodeID]*simNode
	ids   []msg.NodeID
	links simtest.Links[msg.NodeID]
	agree simtest.Agreement[msg.NodeID]
	trace []traceLine
	err   error

	// stats
	delivered int
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
	}
}

func (s *sim) local(n *simNode, t int64) time.Time {
	return n.clock.Local(simBase.Add(time.Duration(t)))
}

func (s *sim) trueOf(n *simNode, l time.Time) int64 { return int64(n.clock.True(l).Sub(simBase)) }

func (s *sim) push(e *event) { s.q.Push(e.at, e) }

func (s *sim) note(node msg.NodeID, what string, env *msg.Envelope) {
	s.trace = append(s.trace, traceLine{at: s.now, node: node, what: what, env: env})
	if len(s.trace) > 4000 {
		s.trace = slices.Delete(s.trace, 0, 2000)
	}
}

func newSim(seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	opts := drawOpts(rng)
	s := &sim{seed: seed, opts: opts, rng: rng, nodes: map[msg.NodeID]*simNode{}}
	s.links = simtest.Links[msg.NodeID]{Drop: opts.dropP, Dup: opts.dupP, Delay: simtest.Delay{
		Base: 500 * time.Microsecond, Spread: opts.maxDelay,
		Tails: [2]simtest.Tail{{OneIn: 20, Max: 400 * time.Millisecond}},
	}}
	s.agree = simtest.Agreement[msg.NodeID]{
		Fail:       func(inv, format string, args ...any) { s.fail(inv+": "+format, args...) },
		EpochLease: simCfg.EpochLease,
		Base:       simBase,
	}
	nInit := 3 + s.rng.IntN(3)
	nJoin := s.rng.IntN(3)
	var initial []msg.Member
	for i := range nInit + nJoin {
		id := msg.NodeID(fmt.Sprintf("n%d", i+1))
		cfg := simCfg
		cfg.Self = msg.Member{ID: id, Store: s.rng.Uint64(), Addr: string(id) + ":7000", Version: 1}
		cfg.Rand = rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
		n := &simNode{cfg: cfg, up: true, initial: i < nInit,
			clock: simtest.NewClock(simBase, 0, 1+(s.rng.Float64()*2-1)*cfg.MaxDrift),
			disk:  simtest.NewDisk[AcceptorRecord, Learned](cfg.Self.Store)}
		n.m = New(cfg, State{})
		s.nodes[id] = n
		s.ids = append(s.ids, id)
		if n.initial {
			initial = append(initial, cfg.Self)
		}
	}
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.initial {
			at := int64(s.rng.IntN(int(200 * time.Millisecond)))
			s.push(&event{at: at, kind: evAction, act: func() {
				if n.up {
					s.apply(n, "bootstrap", nil, n.m.Bootstrap(s.local(n, s.now), initial))
				}
			}})
		} else {
			n.joinAt = int64(500*time.Millisecond) + int64(s.rng.IntN(int(opts.duration/2)))
		}
	}
	s.scheduleActions()
	return s
}

// scheduleActions plans the chaos: crashes (some wiping the disk), joins
// retried until they take, leaves and agreed-down removals on several
// members at once.
func (s *sim) scheduleActions() {
	end := int64(s.opts.duration) * 7 / 10
	for t := int64(0); ; {
		t += int64(s.rng.ExpFloat64() * float64(s.opts.crashEvery))
		if t > end {
			break
		}
		s.push(&event{at: t, kind: evCrash, node: s.ids[s.rng.IntN(len(s.ids))]})
	}
	for range 1 + s.rng.IntN(6) {
		t := int64(300*time.Millisecond) + int64(s.rng.IntN(int(end)))
		for range s.opts.contention {
			s.push(&event{at: t, kind: evAction, act: func() { s.removeSomeone() }})
		}
	}
	for range s.rng.IntN(2) {
		t := int64(300*time.Millisecond) + int64(s.rng.IntN(int(end)))
		s.push(&event{at: t, kind: evAction, act: func() { s.leaveSomeone() }})
	}
	for range s.opts.partitions {
		t := int64(s.rng.IntN(int(end)))
		d := int64(100*time.Millisecond) + int64(s.rng.IntN(int(700*time.Millisecond)))
		s.push(&event{at: t, kind: evAction, act: func() {
			s.links.MendAll()
			var cut []string
			for _, a := range s.ids {
				for _, b := range s.ids {
					if a != b && s.rng.IntN(3) == 0 {
						s.links.Cut(a, b)
						cut = append(cut, string(a)+"->"+string(b))
					}
				}
			}
			s.note("", fmt.Sprintf("partition %v", cut), nil)
		}})
		s.push(&event{at: t + d, kind: evAction, act: func() { s.links.MendAll() }})
	}
	// Joiners (and removed or wiped members) ask to join every 600ms.
	for t := int64(0); t < int64(s.opts.duration); t += int64(600 * time.Millisecond) {
		s.push(&event{at: t, kind: evAction, act: func() { s.joins() }})
	}
}

func (s *sim) randomUp(pred func(*simNode) bool) *simNode {
	var c []*simNode
	for _, id := range s.ids {
		if n := s.nodes[id]; n.up && pred(n) {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[s.rng.IntN(len(c))]
}

func (s *sim) removeSomeone() {
	// Failure detection agreed X down: tell 1–3 members (concurrent proposers).
	a := s.randomUp(func(n *simNode) bool { return n.m.selfMember() })
	if a == nil {
		return
	}
	e := a.m.learned.Epoch
	victim := e.Members[s.rng.IntN(len(e.Members))]
	for range 1 + s.rng.IntN(3) {
		if b := s.randomUp(func(n *simNode) bool { return n.m.selfMember() }); b != nil {
			s.note(b.cfg.Self.ID, "propose-remove "+string(victim.ID), nil)
			s.apply(b, "remove", nil, b.m.ProposeRemove(s.local(b, s.now), victim))
		}
	}
}

func (s *sim) leaveSomeone() {
	a := s.randomUp(func(n *simNode) bool { return n.m.selfMember() })
	if a == nil {
		return
	}
	for range 1 + s.rng.IntN(2) {
		to := s.ids[s.rng.IntN(len(s.ids))]
		s.send(a, a.m.envelopeTo(to, msg.Leave{Member: a.cfg.Self}))
	}
}

func (s *sim) joins() {
	for _, id := range s.ids {
		n := s.nodes[id]
		if !n.up || s.now < n.joinAt {
			continue
		}
		l, _, ok := n.m.Current()
		switch {
		case ok && l.Epoch.Number >= 1 && l.Epoch.Has(n.cfg.Self):
			continue
		case !ok && n.initial:
			continue // it bootstraps
		case ok && l.Epoch.Number == 0:
			continue // bootstrapping
		}
		for range 1 + s.rng.IntN(3) {
			to := s.ids[s.rng.IntN(len(s.ids))]
			if to != id {
				s.send(n, n.m.envelopeTo(to, msg.Join{Member: n.cfg.Self}))
			}
		}
	}
}

// send puts env on the hostile network.
func (s *sim) send(from *simNode, env msg.Envelope) {
	copies := 0
	if !s.links.Blocked(env.From.ID, env.To) {
		copies = s.links.Fate(s.rng)
	}
	if copies == 0 {
		s.note(from.cfg.Self.ID, "drop", &env)
		return
	}
	for range copies {
		d := int64(s.links.Delay.Draw(s.rng))
		s.push(&event{at: s.now + d, kind: evDeliver, node: env.To, env: env})
	}
}

// apply carries out one step's Output the way a driver must: sync Acceptor
// and Learned, check the invariants, then send.
func (s *sim) apply(n *simNode, what string, in *msg.Envelope, out Output) {
	id := n.cfg.Self.ID
	s.note(id, what, in)
	for _, r := range out.Acceptor {
		n.disk.SyncAcceptor(r.Instance, r)
	}
	if out.Learned != nil {
		l := *out.Learned
		s.note(id, fmt.Sprintf("learned %d %v", l.Epoch.Number, simtest.Members(l.Epoch)), nil)
		n.disk.SyncLearned(l)
		s.agree.Learned(id, simBase.Add(time.Duration(s.now)), l.Epoch, func(prev *msg.Epoch) error { return verifyCert(l.Epoch, l.Cert, prev) })
	}
	for _, env := range out.Msgs {
		if env.Epoch > 0 && int64(env.Epoch) > n.durable() {
			s.fail("H10: %s sent %s under epoch %d, durable is %d", id, env.Body.Kind(), env.Epoch, n.durable())
		}
		if env.From != n.cfg.Self || env.FromInc != 0 || env.Version != n.cfg.Self.Version {
			s.fail("header: %s sent %+v", id, env)
		}
	}
	if lu := n.m.LiveUntil(); !lu.IsZero() {
		if l, _, ok := n.m.Current(); ok {
			s.agree.Live(l.Epoch.Number, n.clock.True(lu), 0)
		}
	}
	for _, env := range out.Msgs {
		s.send(n, env)
	}
	s.scheduleTick(n)
	answered := slices.ContainsFunc(out.Msgs, func(e msg.Envelope) bool {
		k := e.Body.Kind()
		return k == msg.KindPromise || k == msg.KindAccepted
	})
	if answered && s.rng.Float64() < s.opts.crashAfterWriteP {
		s.push(&event{at: s.now + 1 + int64(s.rng.IntN(int(5*time.Millisecond))), kind: evCrash, node: id, gen: 1})
	}
}

func (s *sim) scheduleTick(n *simNode) {
	n.tickGen++
	d := n.m.NextDeadline()
	if d.IsZero() {
		return
	}
	at := s.now + 1
	if t := s.trueOf(n, d) + 1; t > at {
		at = t
	}
	s.push(&event{at: at, kind: evTick, node: n.cfg.Self.ID, gen: n.tickGen})
}

func (s *sim) run() error {
	for s.q.Len() > 0 && s.err == nil {
		_, ev := s.q.Pop()
		if ev.at > int64(s.opts.duration) {
			break
		}
		s.now = ev.at
		switch ev.kind {
		case evAction:
			ev.act()
		case evDeliver:
			n := s.nodes[ev.node]
			if n == nil || !n.up {
				continue
			}
			s.delivered++
			s.apply(n, "recv", &ev.env, n.m.Step(s.local(n, s.now), ev.env))
		case evTick:
			n := s.nodes[ev.node]
			if !n.up || ev.gen != n.tickGen {
				continue
			}
			s.apply(n, "tick", nil, n.m.Tick(s.local(n, s.now)))
		case evCrash:
			n := s.nodes[ev.node]
			if !n.up {
				continue
			}
			n.up = false
			n.tickGen++
			wipe := s.rng.IntN(8) == 0
			s.note(ev.node, fmt.Sprintf("crash wipe=%v", wipe), nil)
			if wipe { // H17/H21: a new disk under the old node ID
				n.cfg.Self.Store = s.rng.Uint64()
				n.disk.Wipe(n.cfg.Self.Store)
				s.agree.Forget(ev.node)
				n.initial = false
			}
			down := int64(50*time.Millisecond) + int64(s.rng.IntN(int(time.Second)))
			if ev.gen == 1 { // crash after a write: a quick restart
				down = int64(time.Millisecond) + int64(s.rng.IntN(int(20*time.Millisecond)))
			}
			s.push(&event{at: s.now + down, kind: evRestart, node: ev.node})
		case evRestart:
			n := s.nodes[ev.node]
			n.up = true
			n.m = New(n.cfg, state(&n.disk))
			if l, _, ok := n.m.Current(); ok && int64(l.Epoch.Number) != n.durable() {
				s.fail("restart: %s restored epoch %d, durable %d", ev.node, l.Epoch.Number, n.durable())
			}
			s.note(ev.node, "restart", nil)
			s.scheduleTick(n)
		}
	}
	return s.err
}

func cloneState(st State) State {
	out := State{}
	for _, r := range st.Acceptor {
		out.Acceptor = append(out.Acceptor, cloneRecord(r))
	}
	if st.Learned != nil {
		l := cloneLearned(*st.Learned)
		out.Learned = &l
	}
	return out
}

func (s *sim) dumpTrace(last int) string {
	var b strings.Builder
	from := max(0, len(s.trace)-last)
	for _, t := range s.trace[from:] {
		fmt.Fprintf(&b, "%12v %-4s %s", time.Duration(t.at), t.node, t.what)
		if t.env != nil {
			fmt.Fprintf(&b, " %s->%s e%d %T%+v", t.env.From.ID, t.env.To, t.env.Epoch, t.env.Body, t.env.Body)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func runSeed(seed uint64) (*sim, error) {
	s := newSim(seed)
	return s, s.run()
}

func simReport(t testing.TB, s *sim, err error) {
	t.Helper()
	t.Errorf("===== SEED %d =====\n%v\nlast events:\n%s\nreplay: go test ./epoch -run 'TestSimAgreement$' -epoch.seed=%d -v",
		s.seed, err, s.dumpTrace(40), s.seed)
}

// TestSimAgreement runs the simulator over many seeds: E1, E2 and H10 must
// hold in every one.
func TestSimAgreement(t *testing.T) {
	seeds := []uint64{}
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		n := *flagSeeds
		if testing.Short() {
			n = min(n, 100)
		}
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	var epochs, msgs int
	for _, seed := range seeds {
		s, err := runSeed(seed)
		if err != nil {
			simReport(t, s, err)
			return
		}
		epochs += int(s.agree.Highest())
		msgs += s.delivered
		if *flagSeed != 0 && testing.Verbose() {
			t.Logf("trace:\n%s", s.dumpTrace(1<<30))
		}
	}
	t.Logf("%d seeds: %d epochs agreed, %d messages delivered", len(seeds), epochs, msgs)
}
