package core

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/internal/simtest/lockcheck"
	"github.com/homelock/homelock/msg"
)

// Timings of scripted nodes. Round numbers, so that a reader can check the
// lease arithmetic in the golden files by hand.
const (
	hRetry      = 250 * time.Millisecond
	hLease      = 2 * time.Second
	hMinUseful  = 100 * time.Millisecond
	hEpochLease = 6 * time.Second
	hSkew       = 300 * time.Millisecond
	hDrift      = 0.01
	hPromise    = time.Second
	hWait       = 10 * time.Second // default wait of a Lock
)

var hBase = time.Unix(1_000_000, 0)

// harness drives N core.Nodes by hand: messages wait in a queue until the
// script delivers, drops, duplicates or holds them; virtual time moves only
// when the script says so. Epoch agreement and liveness traffic is delivered
// at once and hidden (it has its own scripts in epoch/), unless the script
// turns "auto epoch" off or "verbose" on.
type harness struct {
	now   time.Time
	nodes []*hnode
	queue simtest.Mailbox[*qmsg]
	out   strings.Builder
	depth int

	autoEpoch bool
	verbose   bool
	// net: a perfect network delivers what is sent at once (run); sends are
	// then printed once, where they are delivered.
	net bool
	// hide: message kinds whose deliveries run prints no line for (their
	// consequences still print).
	hide map[string]bool
	// sent counts messages queued, so a tick that only sent shows its time.
	sent int
	mut  struct {
		home   home.Mutations
		holder delegation.Mutations
	}
	isolated map[msg.NodeID]bool
	// side splits the nodes into groups (split): a message between two
	// nodes on different sides is dropped.
	side map[msg.NodeID]string

	chk checker
	// agree checks epoch agreement (E1, E2) from what the nodes synced;
	// indep is the independent checker the cluster simulator runs (D1–D5,
	// L1, L2, B1, E3, FIFO by receipt, V1, H22).
	agree simtest.Agreement[msg.NodeID]
	indep *lockcheck.Checker
	// ruleOff names the first safety rule switched off since the last reset
	// (a mutation, an unpersisted incarnation, an unreported clock jump);
	// only then may a VIOLATION be printed, and then one must be.
	ruleOff    string
	violations int
	// unexpected are the violations printed while every rule was on: each
	// fails the test, whatever the golden file says.
	unexpected []string
	// settling is the token of the hook completion being reported, while the
	// harness calls Settled (to catch an unsettled release, H20).
	settling *fence.Token
}

type hnode struct {
	id  msg.NodeID
	idx int
	// gen counts the node's processes (lockcheck.Node).
	gen    uint64
	member msg.Member
	clock  simtest.Clock
	disk   hdisk
	core   *Node
	// paused: the process is suspended; stall: its clock stopped too (a VM
	// whose boot-time clock did not count the suspension).
	paused, stall bool
	pausedAt      time.Time
	// stalled are the true-time spans its clock stood still (resume).
	stalled [][2]time.Time
	hooks   []delegation.Event // store hooks asked for and not completed
}

// hdisk is what survives a crash: only what a Ready asked to sync.
type hdisk = simtest.Disk[epoch.AcceptorRecord, epoch.Learned]

type qmsg struct {
	from, to msg.NodeID
	env      msg.Envelope
	held     bool
}

func newHarness() *harness {
	h := &harness{now: hBase, autoEpoch: true, isolated: map[msg.NodeID]bool{}, chk: newChecker()}
	h.agree = simtest.Agreement[msg.NodeID]{
		Fail:       func(inv, format string, args ...any) { h.violation(inv+": "+format, args...) },
		EpochLease: hEpochLease,
		Lag:        JumpAfter(hSkew, hDrift),
		Base:       hBase,
	}
	h.indep = lockcheck.New(lockcheck.World{
		Now:  func() time.Time { return h.now },
		Node: func(i int) lockcheck.Node { return h.nodes[i] },
		ByID: func(id msg.NodeID) lockcheck.Node {
			if n := h.node(string(id)); n != nil {
				return n
			}
			return nil
		},
		Fail: func(inv, format string, args ...any) { h.violation(inv+": "+format, args...) },
		Base: hBase, Skew: hSkew, EpochLease: hEpochLease, Retry: hRetry, Drift: hDrift,
		Position: barrierPos,
	})
	return h
}

// The independent checker's view of a node (lockcheck.Node).
func (n *hnode) Name() msg.NodeID             { return n.id }
func (n *hnode) Index() int                   { return n.idx }
func (n *hnode) Gen() uint64                  { return n.gen }
func (n *hnode) Running() bool                { return n.core != nil }
func (n *hnode) Local(t time.Time) time.Time  { return n.local(t) }
func (n *hnode) TrueAt(l time.Time) time.Time { return n.trueAt(l) }
func (n *hnode) Inc() uint64                  { return n.disk.Inc }
func (n *hnode) Learned() *epoch.Learned      { return n.disk.Learned() }
func (n *hnode) Version() uint32              { return n.member.Version }

func (h *harness) printf(format string, args ...any) {
	h.out.WriteString(strings.Repeat("  ", h.depth))
	fmt.Fprintf(&h.out, format, args...)
	h.out.WriteByte('\n')
}

func (h *harness) violation(format string, args ...any) {
	h.printf("VIOLATION: "+format, args...)
	h.violations++
	if h.ruleOff == "" {
		h.unexpected = append(h.unexpected, fmt.Sprintf(format, args...))
	}
}

// switchOff records that a script turned a safety rule off.
func (h *harness) switchOff(rule string) {
	if h.ruleOff == "" {
		h.ruleOff = rule
	}
}

func ts(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(hBase).Seconds()) }

func (n *hnode) local(t time.Time) time.Time { return n.clock.Local(t) }

func (n *hnode) trueAt(l time.Time) time.Time { return n.clock.True(l) }

// stalledAfter is how long n's clock stood still, in the spans that ended
// after true time from: E2's allowance for a liveness that ends within
// EpochLease and Skew after from.
func (n *hnode) stalledAfter(from time.Time) time.Duration {
	var d time.Duration
	for _, s := range n.stalled {
		if s[1].After(from) {
			d += s[1].Sub(s[0])
		}
	}
	return d
}

func (h *harness) node(id string) *hnode {
	for _, n := range h.nodes {
		if string(n.id) == id {
			return n
		}
	}
	return nil
}

// addNode creates node i+1 with an empty disk and a perfect clock.
func (h *harness) addNode(version uint32) *hnode {
	i := len(h.nodes)
	id := msg.NodeID(fmt.Sprintf("n%d", i+1))
	n := &hnode{
		id:    id,
		idx:   i,
		clock: simtest.NewClock(hBase, 0, 1),
		disk:  simtest.NewDisk[epoch.AcceptorRecord, epoch.Learned](uint64(1001 + i)),
	}
	n.member = msg.Member{ID: id, Store: n.disk.Store, Addr: string(id), Version: version}
	h.nodes = append(h.nodes, n)
	return n
}

func (h *harness) config(n *hnode) Config {
	return Config{
		Observe: func(env msg.Envelope, sent bool) { h.indep.Observe(n, env, sent) },
		Self:    n.member,
		Inc:     n.disk.Inc,
		Epoch: epoch.Config{
			EpochLease: hEpochLease, MaxDrift: hDrift, RetryInterval: hRetry, PromiseTimeout: hPromise,
			Rand: rand.New(rand.NewPCG(n.disk.Store, n.disk.Inc)),
		},
		Home: home.Config{
			EpochLease: hEpochLease, Skew: hSkew, MaxLease: hLease, MinUseful: hMinUseful,
			RetryInterval: hRetry, MaxWaiters: 64, Mutations: h.mut.home,
		},
		Holder: delegation.Config{
			MaxDrift: hDrift, MinUseful: hMinUseful, RetryInterval: hRetry, Lease: hLease,
			Mutations: h.mut.holder,
		},
	}
}

// start boots n's process from its disk: bump and sync the incarnation
// (unless keepInc, the "incarnation not persisted" mutation), restore.
func (h *harness) start(n *hnode, keepInc bool) {
	if !keepInc || n.disk.Inc == 0 {
		n.disk.Inc++
	} else {
		h.switchOff("incarnation not persisted (keep-inc)")
	}
	st := epoch.State{Acceptor: n.disk.Acceptors()}
	marker := false
	if l := n.disk.Learned(); l != nil {
		c := *l
		st.Learned = &c
		marker = n.disk.Markers[l.Epoch.Number]
	}
	n.paused, n.stall, n.hooks = false, false, nil
	n.gen++
	n.core = New(h.config(n), n.local(h.now), st, marker)
	n.core.ObserveClocks(time.Time{}, n.local(h.now), h.now) // the first reading, as Open takes it
	h.printf("%s: start inc=%d (synced) epoch=%s marker=%v", n.id, n.disk.Inc, learnedName(st.Learned), marker)
}

// tick is the driver's timer step: the clocks read (a jump taken first),
// then the machines ticked. The wall clock is true time.
func (h *harness) tick(n *hnode) {
	h.observeClocks(n)
	if n.core != nil {
		h.apply(n, n.core.Tick(n.local(h.now)))
	}
}

// observeClocks reads n's lease clock between two readings of the wall
// clock, as the driver does on every timer step, and lets the core judge a
// jump (ObserveClocks).
func (h *harness) observeClocks(n *hnode) {
	r, ahead := n.core.ObserveClocks(h.now, n.local(h.now), h.now)
	if ahead > 0 {
		h.printf("%s: clock jump, wall time %v ahead", n.id, ahead)
		h.indep.ClockJumped(n)
		h.apply(n, r)
	}
}

func learnedName(l *epoch.Learned) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("e%d", l.Epoch.Number)
}

func memberList(e msg.Epoch) string {
	ids := make([]string, len(e.Members))
	for i, m := range e.Members {
		ids[i] = string(m.ID)
	}
	return "[" + strings.Join(ids, " ") + "]"
}

func (h *harness) up(n *hnode) bool { return n != nil && n.core != nil && !n.paused }

// apply carries out a Ready as a driver must: sync the writes first, then
// send the messages, then deliver the events.
func (h *harness) apply(n *hnode, rd Ready) {
	// The holder's gauges (Stats without a scan) must agree with its keys
	// after every step.
	if err := n.core.Holder().CheckGauges(); err != nil {
		panic(fmt.Sprintf("%s: %v", n.id, err))
	}
	if err := n.core.Home().CheckGauges(); err != nil {
		panic(fmt.Sprintf("%s: %v", n.id, err))
	}
	h.indep.Synced(n, rd.Acceptor)
	h.indep.Step(n, rd.Learned, rd.Events)
	for _, r := range rd.Acceptor {
		n.disk.SyncAcceptor(r.Instance, r)
		if h.verbose {
			h.printf("%s: sync acceptor instance=%d promised=%d accepted=%d", n.id, r.Instance, r.Promised.Counter, r.Accepted.Counter)
		}
	}
	if rd.Learned != nil {
		l := *rd.Learned
		n.disk.SyncLearned(l)
		n.disk.Prune(l.Epoch.Number)
		h.printf("%s: sync learned e%d %s", n.id, l.Epoch.Number, memberList(l.Epoch))
		h.agree.Learned(n.id, h.now, l.Epoch, nil)
	}
	for _, g := range rd.GatePassed {
		n.disk.Markers[g] = true
		h.printf("%s: sync gate-passed e%d", n.id, g)
	}
	var auto []*qmsg
	for _, o := range rd.Msgs {
		q := &qmsg{from: n.id, to: o.To.ID, env: o.Env}
		if h.autoEpoch && isEpochKind(o.Env.Body.Kind()) {
			if h.verbose {
				h.printf("%s", h.describe(q))
			}
			auto = append(auto, q)
			continue
		}
		h.chk.sent(h, n, o.Env)
		if h.cut(n.id, o.To.ID) {
			h.printf("%s (dropped: partition)", h.describe(q))
			continue
		}
		if !h.net {
			h.printf("%s", h.describe(q))
		}
		if !h.hide[kindName(o.Env.Body.Kind())] {
			h.sent++
		}
		h.queue.Post(q)
	}
	if lu := n.core.LiveUntil(); !lu.IsZero() {
		if l, ok := n.core.Current(); ok {
			end := n.trueAt(lu)
			h.agree.Live(l.Epoch.Number, end, n.stalledAfter(end.Add(-hEpochLease-hSkew)))
		}
	}
	if rd.Undeliverable > 0 {
		h.printf("%s: %d undeliverable", n.id, rd.Undeliverable)
	}
	for _, e := range rd.Events {
		h.event(n, e)
	}
	for _, q := range auto {
		h.deliverOne(q, h.verbose)
	}
}

// cut reports whether the network drops messages between a and b: either
// is isolated (partition), or split puts them on different sides.
func (h *harness) cut(a, b msg.NodeID) bool {
	sa, oka := h.side[a]
	sb, okb := h.side[b]
	return h.isolated[a] || h.isolated[b] || oka && okb && sa != sb
}

// deliverOne hands one message to its receiver; show prints the delivery and
// indents what it causes.
func (h *harness) deliverOne(q *qmsg, show bool) {
	to := h.node(string(q.to))
	if show && h.net && h.hide[kindName(q.env.Body.Kind())] {
		show = false
	}
	if show {
		h.printf("%s", h.describe(q))
		h.depth++
		defer func() { h.depth-- }()
	}
	switch {
	case to == nil || to.core == nil:
		if show {
			h.printf("(dropped: %s is down)", q.to)
		}
		return
	case h.cut(q.from, q.to):
		if show {
			h.printf("(dropped: partition)")
		}
		return
	case to.paused:
		if show {
			h.printf("(dropped: %s is paused)", q.to)
		}
		return
	}
	if k := memberKey(q.env.From); show && q.env.FromInc < to.core.minInc[k] {
		h.printf("(%s discards it: i%d is below i%d, which reclaimed from %s)", to.id, q.env.FromInc, to.core.minInc[k], to.id)
	}
	h.chk.delivering(h, to, q.env)
	h.apply(to, to.core.Receive(to.local(h.now), q.env))
}

func (h *harness) event(n *hnode, e delegation.Event) {
	switch e.Kind {
	case delegation.Admitted:
		h.printf("%s: admitted %s locker=%d %s until=%s", n.id, e.Key, e.Locker, e.Token, ts(n.trueAt(e.Expires)))
		h.chk.admitted(h, n, e)
	case delegation.Extended:
		h.printf("%s: extended %s locker=%d %s until=%s", n.id, e.Key, e.Locker, e.Token, ts(n.trueAt(e.Expires)))
		h.chk.extended(h, n, e)
	case delegation.Revoked:
		detail := ""
		if e.Detail != "" {
			detail = " (" + e.Detail + ")"
		}
		h.printf("%s: revoked %s locker=%d %s%s", n.id, e.Key, e.Locker, e.Token, detail)
		h.chk.closeCS(n.id, e.Key, e.Locker)
	case delegation.Failed:
		h.printf("%s: failed %s locker=%d %s (%s)", n.id, e.Key, e.Locker, reasonName(e.Reason), e.Detail)
	case delegation.Settle:
		n.hooks = append(n.hooks, e)
		h.printf("%s: hook settle %s %s inherited=%s deadline=%s", n.id, e.Key, e.Token, barrierName(e.Barrier), ts(n.trueAt(e.Deadline)))
	case delegation.WaitFresh:
		n.hooks = append(n.hooks, e)
		h.printf("%s: hook wait-fresh %s %s barrier=%s", n.id, e.Key, e.Token, barrierName(e.Barrier))
	}
}

func reasonName(r delegation.Reason) string {
	switch r {
	case delegation.ReasonTimeout:
		return "timeout"
	case delegation.ReasonUnavailable:
		return "unavailable"
	case delegation.ReasonTooMany:
		return "too-many"
	case delegation.ReasonLeaseExpired:
		return "lease-expired"
	case delegation.ReasonHookFailed:
		return "hook-failed"
	}
	return "?"
}

func barrierName(b []byte) string {
	if b == nil {
		return "none"
	}
	if len(b) == 0 {
		return "empty"
	}
	return string(b)
}

// barrierPos orders the harness store's barriers "p<N>"; none is -1.
func barrierPos(b []byte) int {
	if len(b) < 2 || b[0] != 'p' {
		return -1
	}
	v, err := strconv.Atoi(string(b[1:]))
	if err != nil {
		return -1
	}
	return v
}

func (h *harness) describe(q *qmsg) string {
	from := string(q.from)
	if q.env.FromInc > 1 {
		from = fmt.Sprintf("%s.i%d", q.from, q.env.FromInc)
	}
	hold := ""
	if q.held {
		hold = " (held)"
	}
	return fmt.Sprintf("%s -> %s %s%s", from, q.to, describeBody(q.env), hold)
}

func req(r msg.RequestID) string { return fmt.Sprintf("%d.%d", r.Inc, r.Seq) }

func optBarrier(b []byte) string {
	if b == nil {
		return ""
	}
	return " barrier=" + barrierName(b)
}

func describeBody(env msg.Envelope) string {
	switch m := env.Body.(type) {
	case msg.Acquire:
		s := fmt.Sprintf("acquire %s req=%s#%d lease=%v", m.Key, req(m.Req), m.Attempt, m.Lease)
		if m.Queued {
			s += " queued"
		}
		return s
	case msg.Grant:
		s := fmt.Sprintf("grant %s %s req=%s#%d lease=%v%s", m.Key, m.Token, req(m.Req), m.Attempt, m.Lease, optBarrier(m.Barrier))
		if m.Recalled {
			s += " recalled"
		}
		if m.Contended {
			s += " contended"
		}
		return s
	case msg.Wait:
		r := map[msg.WaitReason]string{msg.WaitHolder: "holder", msg.WaitGate: "gate", msg.WaitLiveness: "liveness"}[m.Reason]
		return fmt.Sprintf("wait %s req=%s#%d (%s)", m.Key, req(m.Req), m.Attempt, r)
	case msg.NotHome:
		return fmt.Sprintf("not-home %s req=%s (e%d)", m.Key, req(m.Req), env.Epoch)
	case msg.Refused:
		return fmt.Sprintf("refused %s req=%s (%s)", m.Key, req(m.Req), m.Reason)
	case msg.Recall:
		return fmt.Sprintf("recall %s %s", m.Key, m.Token)
	case msg.Release:
		return fmt.Sprintf("release %s %s%s", m.Key, m.Token, optBarrier(m.Barrier))
	case msg.Renew:
		return fmt.Sprintf("renew %s %s #%d lease=%v", m.Key, m.Token, m.Attempt, m.Lease)
	case msg.RenewReply:
		if !m.OK {
			return fmt.Sprintf("renew-reply %s %s #%d refused", m.Key, m.Token, m.Attempt)
		}
		return fmt.Sprintf("renew-reply %s %s #%d ok lease=%v", m.Key, m.Token, m.Attempt, m.Lease)
	case msg.Withdraw:
		return fmt.Sprintf("withdraw %s req=%s", m.Key, req(m.Req))
	case msg.Reclaim:
		return fmt.Sprintf("reclaim (from i%d)", env.FromInc)
	case msg.ReclaimAnswer:
		var held []string
		for _, d := range m.Held {
			held = append(held, fmt.Sprintf("%s %s rem=%v%s", d.Key, d.Token, d.Remaining, optBarrier(d.Barrier)))
		}
		return fmt.Sprintf("reclaim-answer for=i%d held=[%s]", m.ForInc, strings.Join(held, ", "))
	case msg.DrainQuery:
		return fmt.Sprintf("drain-query %s e%d->e%d receiver=i%d", m.Key, m.From, m.To, m.ReceiverInc)
	case msg.Drained:
		s := fmt.Sprintf("drained %s e%d->e%d receiver=i%d%s", m.Key, m.From, m.To, m.ReceiverInc, optBarrier(m.Barrier))
		if l := m.Live; l != nil {
			s += fmt.Sprintf(" live=%s holder=%s.i%d remaining=%v", l.Token, l.Holder.ID, l.HolderInc, l.Remaining)
		}
		return s
	case msg.GateRemaining:
		return fmt.Sprintf("gate-remaining %s e%d->e%d receiver=i%d remaining=%v", m.Key, m.From, m.To, m.ReceiverInc, m.Remaining)
	case msg.Learn:
		return fmt.Sprintf("learn e%d %s", m.Epoch.Number, memberList(m.Epoch))
	}
	return env.Body.Kind().String()
}

// nextDue is n's next timer in true time (zero: none).
func (h *harness) nextDue(n *hnode) time.Time {
	if !h.up(n) {
		return time.Time{}
	}
	d := n.core.NextDeadline()
	if d.IsZero() {
		return d
	}
	t := n.trueAt(d)
	if t.Before(h.now) {
		t = h.now
	}
	return t
}

// advance moves true time to target, firing every node's timers in order.
// With net, every message sent is delivered at once (a perfect network)
// unless held.
func (h *harness) advance(target time.Time, net bool) {
	h.net = net
	defer func() { h.net = false }()
	for guard := 0; guard < 100000; guard++ {
		if net {
			h.deliverAll(nil)
		}
		var next *hnode
		var at time.Time
		for _, n := range h.nodes {
			d := h.nextDue(n)
			if d.IsZero() || d.After(target) {
				continue
			}
			if next == nil || d.Before(at) {
				next, at = n, d
			}
		}
		if next == nil {
			break
		}
		if at.After(h.now) {
			h.now = at
		}
		h.tickShown(next)
	}
	h.now = target
	if net {
		h.deliverAll(nil)
	}
}

// tickShown ticks n and, if that printed anything, puts "@time node tick"
// above it.
func (h *harness) tickShown(n *hnode) {
	prev := h.out.String()
	h.out.Reset()
	sent := h.sent
	h.depth++
	h.tick(n)
	h.depth--
	body := h.out.String()
	h.out.Reset()
	h.out.WriteString(prev)
	if body != "" || (h.net && h.sent > sent) {
		h.printf("@%s %s tick", ts(h.now), n.id)
		h.out.WriteString(body)
	}
}

// filter selects queued messages.
type filter struct {
	from, to, kind, key string
	count               int
	inc                 uint64
}

func keyOf(b msg.Body) string {
	switch m := b.(type) {
	case msg.Acquire:
		return m.Key
	case msg.Grant:
		return m.Key
	case msg.Wait:
		return m.Key
	case msg.NotHome:
		return m.Key
	case msg.Refused:
		return m.Key
	case msg.Recall:
		return m.Key
	case msg.Release:
		return m.Key
	case msg.Renew:
		return m.Key
	case msg.RenewReply:
		return m.Key
	case msg.Withdraw:
		return m.Key
	case msg.DrainQuery:
		return m.Key
	case msg.Drained:
		return m.Key
	case msg.GateRemaining:
		return m.Key
	}
	return ""
}

func kindName(k msg.Kind) string { return strings.ReplaceAll(k.String(), "_", "-") }

func (f *filter) match(q *qmsg) bool {
	return (f.from == "" || string(q.from) == f.from) &&
		(f.to == "" || string(q.to) == f.to) &&
		(f.kind == "" || kindName(q.env.Body.Kind()) == f.kind) &&
		(f.key == "" || keyOf(q.env.Body) == f.key) &&
		(f.inc == 0 || q.env.FromInc == f.inc)
}

// pick returns the queued messages f selects (held ones only if wantHeld),
// in queue order, at most f.count of them.
func (h *harness) pick(f *filter, wantHeld bool) []*qmsg {
	var got []*qmsg
	for _, q := range h.queue.All() {
		if to := h.node(string(q.to)); to != nil && to.paused && !wantHeld {
			continue // a paused process reads nothing; it waits in the queue
		}
		if (f == nil || f.match(q)) && q.held == wantHeld {
			got = append(got, q)
			if f != nil && f.count > 0 && len(got) == f.count {
				break
			}
		}
	}
	return got
}

func (h *harness) remove(q *qmsg) {
	h.queue.Drop(func(o *qmsg) bool { return o == q })
}

// deliver delivers the messages f selects now (not those they cause).
func (h *harness) deliver(f *filter) int {
	got := h.pick(f, false)
	for _, q := range got {
		h.remove(q)
		h.deliverOne(q, true)
	}
	return len(got)
}

// deliverAll delivers until nothing deliverable is left (bounded).
func (h *harness) deliverAll(f *filter) {
	for i := 0; i < 1000; i++ {
		if h.deliver(f) == 0 {
			return
		}
	}
	h.printf("(deliver bound reached)")
}

// crash ends n's process: volatile state gone, synced disk kept, messages
// in flight to it lost unless held.
func (h *harness) crash(n *hnode) {
	n.core = nil
	n.paused, n.hooks = false, nil
	// A message the script holds is still in the network: it may reach the
	// next process (H13). The rest were on connections that died.
	h.queue.Drop(func(q *qmsg) bool { return q.to == n.id && !q.held })
	h.chk.crashed(n.id)
	h.printf("%s: crashed (inc %d, learned %s, markers %v)", n.id, n.disk.Inc, learnedName(n.disk.Learned()), n.disk.MarkerList())
}

// checker watches the conversation and prints a VIOLATION line when an
// invariant breaks, so that a "rule off" script shows the bad outcome.
type checker struct {
	open       []*openCS
	maxAdmit   map[string]fence.Token
	granted    map[string]map[fence.Token]bool
	maxGranted map[string]fence.Token
	// released is, per key, the newest barrier a home accepted with a
	// Release, and the node now answerable for handing it on (the home, or
	// the new home a Drained reached). A crash of that node ends the promise.
	released map[string]released
	// recalled: Recall messages delivered, per receiver and delegation: had
	// it admitted anything by then.
	recalled map[msg.NodeID]map[fence.Token]recallSeen
	// admits counts admissions per node and delegation.
	admits map[msg.NodeID]map[fence.Token]int
	// writes counts critical sections per key: the harness store's position.
	writes map[string]int
	// grantIn is the Grant being delivered (to catch one discarded as late).
	grantIn *grantIn
}

type openCS struct {
	node   msg.NodeID
	key    string
	locker uint64
	token  fence.Token
	end    time.Time // true time
}

type recallSeen struct {
	admitsBefore int
}

type released struct {
	pos  int
	from msg.NodeID
	by   msg.NodeID
}

type grantIn struct {
	to msg.NodeID
	g  msg.Grant
}

func newChecker() checker {
	return checker{
		maxAdmit: map[string]fence.Token{}, granted: map[string]map[fence.Token]bool{},
		maxGranted: map[string]fence.Token{}, released: map[string]released{},
		recalled: map[msg.NodeID]map[fence.Token]recallSeen{}, writes: map[string]int{},
		admits: map[msg.NodeID]map[fence.Token]int{},
	}
}

// sent checks what a node sends: I2 on new Grants, barriers handed on,
// releases that follow a hook completion for another token, and grants
// discarded as late.
func (c *checker) sent(h *harness, n *hnode, env msg.Envelope) {
	switch b := env.Body.(type) {
	case msg.Grant:
		seen := c.granted[b.Key]
		if seen == nil {
			seen = map[fence.Token]bool{}
			c.granted[b.Key] = seen
		}
		if !seen[b.Token] {
			if !c.maxGranted[b.Key].Less(b.Token) {
				h.violation("I2 tokens increase: %s granted %s %s, not above %s granted before", n.id, b.Key, b.Token, c.maxGranted[b.Key])
			}
			seen[b.Token] = true
			c.maxGranted[b.Key] = b.Token
		}
		if r, ok := c.released[b.Key]; ok && barrierPos(b.Barrier) < r.pos {
			h.violation("barrier went backwards: %s hands %s barrier=%s on with %s, older than p%d released by %s before",
				n.id, b.Key, barrierName(b.Barrier), b.Token, r.pos, r.from)
		}
	case msg.Release:
		if h.settling != nil && *h.settling != b.Token {
			h.violation("unsettled release: %s releases %s %s with the barrier of a hook for %s", n.id, b.Key, b.Token, *h.settling)
		}
		if gi := c.grantIn; gi != nil && gi.to == n.id && gi.g.Token == b.Token && !gi.g.Recalled &&
			!c.isRecalled(n.id, b.Token) && n.core.Holder().Stats().Deferred > 0 {
			h.violation("I5 progress: %s discards grant %s %s as late while its lockers wait", n.id, b.Key, b.Token)
		}
	}
}

func (c *checker) isRecalled(id msg.NodeID, tok fence.Token) bool {
	_, ok := c.recalled[id][tok]
	return ok
}

// delivering notes what a message is about to do at its receiver.
func (c *checker) delivering(h *harness, to *hnode, env msg.Envelope) {
	c.grantIn = nil
	switch b := env.Body.(type) {
	case msg.Release:
		if tok, _, ok := to.core.Home().Holding(b.Key); ok && tok == b.Token {
			if p := barrierPos(b.Barrier); p >= 0 {
				r := c.released[b.Key]
				c.released[b.Key] = released{pos: max(p, r.pos), from: env.From.ID, by: to.id}
			}
		}
	case msg.Drained:
		if r, ok := c.released[b.Key]; ok {
			r.by = to.id
			c.released[b.Key] = r
		}
	case msg.Recall:
		if c.recalled[to.id] == nil {
			c.recalled[to.id] = map[fence.Token]recallSeen{}
		}
		if _, ok := c.recalled[to.id][b.Token]; !ok {
			c.recalled[to.id][b.Token] = recallSeen{admitsBefore: c.admits[to.id][b.Token]}
		}
	case msg.Grant:
		c.grantIn = &grantIn{to: to.id, g: b}
	}
}

// admitted checks I1 (no other critical section on the key still valid in
// true time), that every admission's token is above every earlier one's
// (a token per critical section), and that no critical section starts
// under a recalled delegation.
func (c *checker) admitted(h *harness, n *hnode, e delegation.Event) {
	for _, o := range c.open {
		if o.key == e.Key && o.node != n.id && o.end.After(h.now) {
			h.violation("I1 exclusion: %s admitted %s with %s while %s holds it with %s until %s",
				n.id, e.Key, e.Token, o.node, o.token, ts(o.end))
		}
	}
	if !c.maxAdmit[e.Key].Less(e.Token) {
		h.violation("I2 tokens increase: %s admitted %s with %s, not above an earlier admission's %s", n.id, e.Key, e.Token, c.maxAdmit[e.Key])
	} else {
		c.maxAdmit[e.Key] = e.Token
	}
	// L3: nothing new on a recalled delegation, but for one section of a
	// holder recalled before it admitted anything, whether its Recall came
	// after its Grant (it waited for freshness) or overtook it: that is the
	// contended grant's one turn, without which a contender could lose every
	// turn.
	d := e.Token.Delegation()
	if r, ok := c.recalled[n.id][d]; ok && (r.admitsBefore > 0 || c.admits[n.id][d] > 0) {
		h.violation("recalled delegation admits: %s admitted %s locker=%d under %s after its recall", n.id, e.Key, e.Locker, e.Token)
	}
	if c.admits[n.id] == nil {
		c.admits[n.id] = map[fence.Token]int{}
	}
	c.admits[n.id][d]++
	c.writes[e.Key]++
	h.indep.Wrote(e.Key, e.Token, c.writes[e.Key])
	c.open = append(c.open, &openCS{node: n.id, key: e.Key, locker: e.Locker, token: e.Token, end: n.trueAt(e.Expires)})
}

func (c *checker) extended(h *harness, n *hnode, e delegation.Event) {
	for _, o := range c.open {
		if o.node == n.id && o.key == e.Key && o.locker == e.Locker {
			o.end = n.trueAt(e.Expires)
		}
	}
}

func (c *checker) closeCS(node msg.NodeID, key string, locker uint64) {
	for i, o := range c.open {
		if o.node == node && o.key == key && o.locker == locker {
			c.open = append(c.open[:i], c.open[i+1:]...)
			return
		}
	}
}

// crashed closes the node's critical sections and ends the freshness
// promise of keys it was answerable for (nothing is promised after a crash).
func (c *checker) crashed(id msg.NodeID) {
	kept := c.open[:0]
	for _, o := range c.open {
		if o.node != id {
			kept = append(kept, o)
		}
	}
	c.open = kept
	for k, r := range c.released {
		if r.by == id {
			delete(c.released, k)
		}
	}
}
