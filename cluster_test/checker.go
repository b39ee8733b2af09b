package clustertest

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// Invariant names, as docs/design.md numbers them.
const (
	invExclusion    = "I1 exclusion"
	invTokenOrder   = "I2 tokens increase"
	invFence        = "I3 fenced register"
	invLostUpdate   = "I4 no lost update"
	invNoHang       = "I5 nothing hangs"
	invProgress     = "I5 progress after heal"
	invEpochFork    = simtest.InvEpochFork
	invEpochGrows   = simtest.InvEpochGrows
	invEpochLive    = simtest.InvEpochLive
	invLinearizable = "I4 linearizable history (porcupine)"
	invFIFO         = "fairness: FIFO grants"
	invFailClosed   = "V1 mixed versions fail closed"
	invHeldAlive    = "L6 held while alive"
	invHandOn       = "L6 waiters progress once the section ends"
	invDeadHolder   = "L6 a dead holder's lease is waited out"
	invRenewOnTime  = "L7 renewal at half the lease"
	invWorkload     = "W1 every live node's workload runs after the heal"
	// invClockModel is the simulator's own: a lease clock is monotonic,
	// and a model that lets one go back tests nothing a real node meets.
	invClockModel = "simulator: a lease clock never goes back"
)

// handOnBound is how soon after a section ends a waiter on its key must be
// admitted once the cluster settled: a drain, a release, a grant and two
// store hooks (the holder's barrier hook before its Release, the next
// holder's wait-fresh hook before it admits), with room for one lost
// message's resend, and for one more wait-fresh hook: a waiter whose
// deadline passes while its hook runs gives the key back unused, and the
// next one waits for its own. Hooks take up to 2ms unless
// SimConfig.SlowHooks says otherwise.
func (c *checker) handOnBound() time.Duration { return 8*simRetry + 3*c.s.cfg.SlowHooks }

// ghost is the critical section of a crashed holder: its lease must still
// be waited out by everyone else until the node starts again (whose
// reclaim then says it holds nothing).
type ghost struct {
	node  *simNode
	gen   uint64
	token fence.Token
	end   time.Time // true time
}

type checker struct {
	s          *Sim
	violations []Violation

	open       map[string][]*critical
	maxAdmit   map[string]fence.Token
	granted    map[string]map[fence.Token]bool
	maxGranted map[string]fence.Token
	regs       map[string]*register
	acks       int
	admissions int
	ops        map[string][]porcupine.Operation
	// agree checks epoch agreement (E1, E2) from what nodes synced.
	agree simtest.Agreement[*simNode]
	// progress bookkeeping for the healed phase
	progress map[string]map[msg.NodeID]int
	// lastAcquire is each node's latest request per key, from the Acquires
	// it sent; queuedBehind the request the key's home last said it queued
	// behind a holder (a Wait{holder} the node received).
	lastAcquire, queuedBehind map[string]map[msg.NodeID]msg.RequestID
	asked                     map[string]map[msg.NodeID]int
	// workedAfterHeal: the node had a workload lock outstanding at the heal
	// or started one since (W1).
	workedAfterHeal map[msg.NodeID]bool

	ghosts map[string][]ghost
	// lastAdmit is the true time of the last admission per key.
	lastAdmit map[string]time.Time
	// renewSent is when each holder last sent a Renew per key (its clock)
	// and for which token.
	renewSent map[string]renewMark
	// lateRenews are the first Renews of this step that looked late; an
	// admission in the same step, whose event comes after its messages,
	// makes them due (settleRenews).
	lateRenews []lateRenew
}

type renewMark struct {
	token fence.Token
	at    time.Time
}

type lateRenew struct {
	node  *simNode
	key   string
	token fence.Token
	late  time.Duration
}

func newChecker(s *Sim) *checker {
	c := &checker{
		s:               s,
		open:            make(map[string][]*critical),
		maxAdmit:        make(map[string]fence.Token),
		granted:         make(map[string]map[fence.Token]bool),
		maxGranted:      make(map[string]fence.Token),
		regs:            make(map[string]*register),
		ops:             make(map[string][]porcupine.Operation),
		progress:        make(map[string]map[msg.NodeID]int),
		lastAcquire:     make(map[string]map[msg.NodeID]msg.RequestID),
		queuedBehind:    make(map[string]map[msg.NodeID]msg.RequestID),
		asked:           make(map[string]map[msg.NodeID]int),
		workedAfterHeal: make(map[msg.NodeID]bool),
		ghosts:          make(map[string][]ghost),
		lastAdmit:       make(map[string]time.Time),
		renewSent:       make(map[string]renewMark),
	}
	c.agree = simtest.Agreement[*simNode]{Fail: c.fail, EpochLease: simEpochLease, Lag: simJumpAfter, Base: simBase}
	return c
}

func (c *checker) fail(inv, format string, args ...any) {
	if c.s.cfg.Mutations.Any() && len(c.violations) > 0 {
		return
	}
	c.violations = append(c.violations, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...), At: c.s.now.Sub(simBase)})
	c.s.trace("VIOLATION %s", inv)
	c.s.stopped = true
	c.s.indep.Stop()
}

func (c *checker) reg(key string) *register {
	r := c.regs[key]
	if r == nil {
		r = &register{}
		c.regs[key] = r
	}
	return r
}

// settled is when the healed phase's progress checks begin: faults are over
// and every lease, gate and detection delay has had time to run out.
func (c *checker) settled() time.Time {
	return c.s.healedAt.Add(simEpochLease + simSkew + 2*simLease + c.s.downAfter + time.Second)
}

func (c *checker) lockStarted(cs *critical, deadline time.Time) {
	if cs.started.After(c.settled()) && !cs.long && cs.started.Before(simBase.Add(c.s.cfg.Duration-c.s.queueWait())) {
		perNode(c.asked, cs.key)[cs.node.id]++
	}
	if !cs.oneShot && !cs.started.Before(c.s.healedAt) {
		c.workedAfterHeal[cs.node.id] = true
	}
	gen := cs.node.gen
	local := cs.node.local(deadline) // the deadline is on the node's clock
	var check func()
	check = func() {
		if cs.resolved || cs.node.gen != gen || cs.node.core == nil || cs.node.paused {
			return
		}
		if end := cs.node.trueAt(local).Add(4 * simRetry); end.After(c.s.now) {
			c.s.at(end, &event{kind: evFault, run: check}) // its clock stalled meanwhile
			return
		}
		c.fail(invNoHang, "%s locker %d on %s neither admitted nor failed by its deadline", cs.node.id, cs.locker, cs.key)
	}
	c.s.at(deadline.Add(4*simRetry), &event{kind: evFault, run: check})
}

// sentAcquire and receivedWait keep lastAcquire and queuedBehind.
func (c *checker) sentAcquire(from msg.NodeID, a msg.Acquire) {
	perNode(c.lastAcquire, a.Key)[from] = a.Req
}

func (c *checker) receivedWait(to msg.NodeID, w msg.Wait) {
	if w.Reason == msg.WaitHolder {
		perNode(c.queuedBehind, w.Key)[to] = w.Req
	}
}

// perNode is key's map in m, made on first use.
func perNode[V any](m map[string]map[msg.NodeID]V, key string) map[msg.NodeID]V {
	if m[key] == nil {
		m[key] = make(map[msg.NodeID]V)
	}
	return m[key]
}

// admit checks I1 (no other critical section on the key is still valid on
// its holder's clock) and that every admission's token is above every
// earlier one's on the key, sections of one delegation included.
func (c *checker) admit(cs *critical) {
	c.admissions++
	if l, ok := cs.node.core.Current(); ok {
		for _, m := range l.Epoch.Members {
			if m.Version != cs.node.member.Version {
				c.fail(invFailClosed, "%s (v%d) admitted %s while its epoch %d has %s at v%d",
					cs.node.id, cs.node.member.Version, cs.key, l.Epoch.Number, m.ID, m.Version)
				return
			}
		}
	}
	for _, o := range c.open[cs.key] {
		if o.closed || o == cs {
			continue
		}
		if end := o.node.trueAt(o.expires); end.After(c.s.now) {
			c.fail(invExclusion, "%s admitted %s with %s while %s holds it with %s valid until %v",
				cs.node.id, cs.key, cs.token, o.node.id, o.token, end.Sub(simBase))
			return
		}
	}
	for _, g := range c.ghosts[cs.key] {
		if g.node != cs.node && g.node.core == nil && g.node.gen == g.gen && g.end.After(c.s.now) {
			c.fail(invDeadHolder, "%s admitted %s with %s while crashed %s's section under %s was valid until %v",
				cs.node.id, cs.key, cs.token, g.node.id, g.token, g.end.Sub(simBase))
			return
		}
	}
	c.lastAdmit[cs.key] = c.s.now
	if !c.maxAdmit[cs.key].Less(cs.token) {
		c.fail(invTokenOrder, "%s admitted %s with %s, not above an earlier admission's %s (a token per critical section)", cs.node.id, cs.key, cs.token, c.maxAdmit[cs.key])
	}
	c.maxAdmit[cs.key] = cs.token
	c.open[cs.key] = append(c.open[cs.key], cs)
	if cs.at.After(c.settled()) {
		perNode(c.progress, cs.key)[cs.node.id]++
	}
}

func (c *checker) closeCS(cs *critical) {
	if cs.closed {
		return
	}
	cs.closed = true
	list := c.open[cs.key]
	for i, o := range list {
		if o == cs {
			c.open[cs.key] = append(list[:i], list[i+1:]...)
			break
		}
	}
}

func (c *checker) acked(cs *critical) {
	c.acks++
	c.ops[cs.key] = append(c.ops[cs.key], porcupine.Operation{
		ClientId: cs.node.idx,
		Input:    cs.read,
		Output:   cs.read + 1,
		Call:     cs.at.Sub(simBase).Nanoseconds(),
		Return:   c.s.now.Sub(simBase).Nanoseconds(),
	})
}

func (c *checker) failed(cs *critical, e delegation.Event) {
	if cs.started.After(c.settled()) && !cs.node.removed && !c.s.quorumLost() {
		c.fail(invProgress, "%s locker %d on %s failed after the cluster healed: reason %d (%s)", cs.node.id, cs.locker, cs.key, e.Reason, e.Detail)
	}
}

// revoked: once the cluster settled, a section without its own lease is
// never revoked: its holder is alive and answering, so it keeps renewing.
// A fixed schedule may owe that to a section from its admission (owed).
func (c *checker) revoked(cs *critical, e delegation.Event) {
	if cs.admitted && cs.lease == 0 && (cs.at.After(c.settled()) || cs.owed) {
		c.fail(invHeldAlive, "%s's section on %s under %s, admitted at %v, was revoked (%s) while its holder was alive",
			cs.node.id, cs.key, cs.token, cs.at.Sub(simBase), e.Detail)
	}
}

// ended: once the cluster settled, a section that ends with lockers of
// other nodes waiting for its key hands the key on within handOnBound. It
// is owed to a waiter that will still wait then: one whose deadline falls
// within the bound may give up first, and a burst of such waiters, each
// giving back unused the grant it waited fresh for, can use up the bound
// with slow store hooks (homelock sim --slow-hooks 300ms, seed 7000304)
// while nobody is left to admit.
func (c *checker) ended(cs *critical) {
	if !cs.at.After(c.settled()) {
		return
	}
	end, bound := c.s.now, c.handOnBound()
	waiting := false
	for _, n := range c.s.nodes {
		if n == cs.node || n.core == nil {
			continue
		}
		for _, o := range n.lockers {
			if o.key == cs.key && !o.resolved && o.started.Before(c.s.now) && n.trueAt(o.deadline).After(end.Add(bound)) {
				waiting = true
			}
		}
	}
	if !waiting {
		return
	}
	c.s.at(end.Add(bound), &event{kind: evFault, run: func() {
		// An admission at the very instant counts: the unlock that ended
		// the section admits a waiter of its own node in that step (seed
		// 589,401), whose own end is judged in turn.
		if c.lastAdmit[cs.key].Before(end) {
			c.fail(invHandOn, "%s's section on %s under %s ended at %v with others waiting; nobody admitted %v later",
				cs.node.id, cs.key, cs.token, end.Sub(simBase), bound)
		}
	}})
}

// renewing checks L7 on every Renew a holder sends once healed: the first
// attempt for the delegation's current expiry goes out at half its lease
// (or at the admission that found less left), not later. An attempt sent at
// or after half the lease and still being resent asks for what a section
// admitted meanwhile needs (the answer extends from that send): its next
// resend is no first attempt (docs/locks.md).
func (c *checker) renewing(n *simNode, r msg.Renew) {
	id := string(n.id) + "/" + r.Key
	prev := c.renewSent[id]
	now := n.local(c.s.now)
	c.renewSent[id] = renewMark{token: r.Token, at: now}
	tok, exp, _, ok := n.core.Holder().Holding(r.Key)
	if !ok || tok != r.Token || !c.s.now.After(c.s.healedAt.Add(simLease)) {
		return
	}
	half := exp.Add(-n.core.Holder().Lease(r.Key) / 2)
	due := half
	for _, cs := range n.lockers {
		if cs.key == r.Key && cs.admitted && !cs.closed {
			if at := n.local(cs.at); at.After(due) {
				due = at
			}
		}
	}
	if prev.token == r.Token && (!prev.at.Before(due) || (!prev.at.Before(half) && now.Sub(prev.at) <= simRetry+simRetry/2)) {
		return // a resend
	}
	if now.Sub(due) > simRetry/2 {
		c.lateRenews = append(c.lateRenews, lateRenew{node: n, key: r.Key, token: r.Token, late: now.Sub(due)})
	}
}

// settleRenews judges the Renews n sent in the step just applied that
// looked late: one that goes out with an admission on its key in the same
// step is the renewal at "the admission that found less left" (a store
// hook that held the admission past half the lease; --slow-hooks 500ms
// showed it), the rest are late.
func (c *checker) settleRenews(n *simNode) {
	if len(c.lateRenews) == 0 {
		return
	}
	rest := c.lateRenews[:0]
	for _, lr := range c.lateRenews {
		if lr.node != n {
			rest = append(rest, lr)
			continue
		}
		admittedNow := false
		for _, cs := range n.lockers {
			if cs.key == lr.key && cs.admitted && cs.at.Equal(c.s.now) {
				admittedNow = true
			}
		}
		if !admittedNow {
			c.fail(invRenewOnTime, "%s first renewed %s (%s) %v after half its lease was gone",
				n.id, lr.key, lr.token, lr.late)
		}
	}
	c.lateRenews = rest
}

func (c *checker) crashed(n *simNode) {
	for _, cs := range n.lockers {
		if cs.admitted && !cs.closed {
			c.ghosts[cs.key] = append(c.ghosts[cs.key], ghost{node: n, gen: n.gen + 1, token: cs.token, end: n.trueAt(cs.expires)})
		}
		c.closeCS(cs)
		cs.resolved = true
	}
}

// sending checks what a node sends as the core hands it on, to a peer or
// to itself (a message to itself is answered within the step and never
// shows in Ready.Msgs), before any answer changes the machines: L7 on every
// Renew, and I2 on every Grant a home sends: a new token for a key is above
// every token granted for it before; a re-sent Grant repeats one.
func (c *checker) sending(n *simNode, env msg.Envelope) {
	if r, ok := env.Body.(msg.Renew); ok {
		c.renewing(n, r)
	}
	g, ok := env.Body.(msg.Grant)
	if !ok {
		return
	}
	seen := c.granted[g.Key]
	if seen == nil {
		seen = make(map[fence.Token]bool)
		c.granted[g.Key] = seen
	}
	if seen[g.Token] {
		return
	}
	if !c.maxGranted[g.Key].Less(g.Token) {
		c.fail(invTokenOrder, "%s granted %s with %s, not above %s granted before", n.id, g.Key, g.Token, c.maxGranted[g.Key])
	}
	seen[g.Token] = true
	c.maxGranted[g.Key] = g.Token
	c.fifo(n, g)
}

// fifo checks that a fresh grant went to the request that had queued longest
// at its home.
func (c *checker) fifo(n *simNode, g msg.Grant) {
	if tok, _, ok := n.core.Home().Holding(g.Key); !ok || tok != g.Token {
		return // already released within the same step
	}
	granted, ok, queued := n.core.Home().QueueOrder(g.Key)
	if !ok {
		return
	}
	for _, q := range queued {
		if q.Before(granted) {
			c.fail(invFIFO, "%s granted %s (%s) to a request queued at %v while one queued at %v still waits",
				n.id, g.Key, g.Token, n.trueAt(granted).Sub(simBase), n.trueAt(q).Sub(simBase))
			return
		}
	}
}

func (c *checker) learned(n *simNode, l epoch.Learned) {
	c.agree.Learned(n, c.s.now, l.Epoch, nil)
}

// live records the epoch liveness n holds after a step (E2), with what its
// lease clock stalled since the round that gave it was sent (the liveness
// ends EpochLease less the drift after it, on the lease clock).
func (c *checker) live(n *simNode) {
	if lu := n.core.LiveUntil(); !lu.IsZero() {
		if l, ok := n.core.Current(); ok {
			sent := n.trueAt(lu.Add(-time.Duration(float64(simEpochLease) * (1 - simDrift))))
			c.agree.Live(l.Epoch.Number, n.trueAt(lu), n.stalledSince(sent))
		}
	}
}

// final runs the end-of-run checks: no lost increment (counter and
// porcupine), and every contender progressed after the heal.
func (c *checker) final() {
	keys := make([]string, 0, len(c.regs))
	for k := range c.regs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		acked := len(c.ops[k])
		if v := c.regs[k].value; v != acked {
			c.fail(invLostUpdate, "%s ends at %d after %d acknowledged increments", k, v, acked)
			return
		}
		if res := porcupine.CheckOperationsTimeout(counterModel, c.ops[k], time.Second); res == porcupine.Illegal {
			c.fail(invLinearizable, "history of %s (%d increments) is not linearizable", k, acked)
			return
		}
	}
	c.workloadRan()
	if c.s.quorumLost() {
		return
	}
	for key, askers := range c.asked {
		for id := range askers {
			n := c.s.nodeByID(id)
			if n == nil || n.removed || n.core == nil {
				continue
			}
			if c.progress[key][id] != 0 {
				continue
			}
			// Still queued at the home behind holders at the end: FIFO by
			// receipt (lockcheck) says nobody who asked after it went first,
			// and L6 that the key was handed on at every section's end, so
			// only the queue ahead of it, which long sections can make
			// longer than what is left of the run, explains the wait
			// (seed 45,583: ten nodes, four sections of 360-400 ms in a row).
			if req := c.lastAcquire[key][id]; req != (msg.RequestID{}) && c.queuedBehind[key][id] == req {
				continue
			}
			c.fail(invProgress, "%s asked for %s %d times after the heal and was never admitted", id, key, askers[id])
			return
		}
	}
}

// workloadRan checks the simulator's own workload (W1): every node that runs
// at the end had a workload lock outstanding at the heal or started one
// since, restarted and closed processes included. A restarted process that
// lost its lockers would leave most of a schedule unlocked and every check
// above vacuous for it.
func (c *checker) workloadRan() {
	cfg := c.s.cfg
	if cfg.Lockers == 0 || cfg.Script != nil || c.s.healedAt.After(simBase.Add(cfg.Duration-simLockStop-time.Second)) {
		return
	}
	for _, n := range c.s.nodes {
		if n.core != nil && !n.gone && !c.workedAfterHeal[n.id] {
			c.fail(invWorkload, "%s runs, had no locker at the heal at %v and started none since", n.id, c.s.healedAt.Sub(simBase))
			return
		}
	}
}

// healing notes the workload's lockers outstanding at the heal (W1): with
// slow hooks one may wait from before the heal almost to the end, behind
// every other node's.
func (c *checker) healing() {
	for _, n := range c.s.nodes {
		if n.core == nil {
			continue
		}
		for _, cs := range n.lockers {
			if !cs.oneShot {
				c.workedAfterHeal[n.id] = true
			}
		}
	}
}

// counterModel: each operation read `in` and wrote in+1; a history is legal
// iff the increments can be ordered so that each read its predecessor's write.
var counterModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, in, out any) (bool, any) {
		if state.(int) != in.(int) {
			return false, state
		}
		return true, out.(int)
	},
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("read %d, wrote %d", in, out) },
}
