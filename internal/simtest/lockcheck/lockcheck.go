package lockcheck

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/msg"
)

// World is what the checker needs of the harness: the true time, its nodes,
// the protocol's bounds, and where a violation goes.
type World struct {
	Now func() time.Time
	// Node is the node of index i; ByID the node running under id, nil for
	// none.
	Node func(i int) Node
	ByID func(id msg.NodeID) Node
	Fail func(inv, format string, args ...any)
	// Base is the origin of true time in messages.
	Base time.Time
	// The protocol's configuration, as every node runs it.
	Skew, EpochLease, Retry time.Duration
	Drift                   float64
	// Position reads a barrier's store position (DecimalPosition if nil).
	Position func(barrier []byte) int
}

// Node is one node as the checker sees it: its clock, its process and its
// disk. A restart keeps the node and its index and bumps Gen.
type Node interface {
	Name() msg.NodeID
	Index() int
	Gen() uint64
	// Running: a process runs (Gen is its generation).
	Running() bool
	Local(t time.Time) time.Time
	TrueAt(l time.Time) time.Time
	// Inc is the incarnation on its disk, Learned the epoch on its disk.
	Inc() uint64
	Learned() *epoch.Learned
	Version() uint32
}

// Stop ends the checking: a run stopped at its first violation judges
// nothing after it.
func (c *Checker) Stop() { c.stopped = true }

// Synced records the acceptor records n's step synced (E3: a proposer's own
// acceptor answers it within the step, with no message to observe).
func (c *Checker) Synced(n Node, recs []epoch.AcceptorRecord) { c.accepts.synced(n, recs) }

// Wrote records a write committed at store position version by the critical
// section with token tok (B1).
func (c *Checker) Wrote(key string, tok fence.Token, version int) { c.bars.wrote(key, tok, version) }

// LiveUntil is n's current process's epoch liveness as the checker derived
// it from the rounds it sent and the answers it had (n's clock).
func (c *Checker) LiveUntil(n Node) (time.Time, bool) {
	t, ok := c.live[c.proc(n)]
	return t, ok
}

// Invariants the independent checker owns. It re-derives them from the
// messages each process sent and acted on, the true time, the clocks' rates
// and the configured bounds, never from a machine's own state.
const (
	InvDelegExclusion = "D1 one valid delegation per key"
	InvHolderLease    = "D2 holder within its derived lease"
	InvRecall         = "D3 no new admission after a recall"
	InvHomeView       = "D4 no grant while another delegation may be live (home view)"
	InvHolderFirst    = "D5 holder expires before its home"
	InvLiveness       = "L1 lease within the home's liveness"
	InvEpochBound     = "L2 epoch n's delegations end within EpochLease + Skew of n+1"
	InvFIFOReceipt    = "fairness: FIFO by receipt"
	InvFailClosedEp   = "V1 fail closed (learned epochs)"
	InvEcho           = "H22 a grant echoes the last attempt heard"
)

// Checker is the independent checker. Every process's observed messages are
// buffered during its step and judged when the step's Ready is applied, so
// that what a step did as a whole (a Grant received and released at once)
// counts, not the order of lines within it.
type Checker struct {
	w World
	// stopped: the run ended (a mutation's first violation); judge nothing
	// more.
	stopped bool
	// pending holds, per node index, what its process observed in the
	// current step.
	pending [][]observed

	// acqSent is the first true send time of each attempt, by request: a
	// request is retried a handful of times, so that a map by attempt
	// held and rehashed several entries per request.
	acqSent map[reqKey][]attemptSent
	// asker is the process that sent each request: a Grant is for it, even
	// when the node has restarted since (its new process refuses it).
	asker   map[askKey]procKey
	renSent map[renKey]time.Time
	delegs  map[string][]*deleg // by key, every delegation still of interest
	rounds  map[roundKey]*round
	live    map[procKey]time.Time // liveness on the node's clock
	// liveIn is the liveness L1 judges by: from the rounds of one epoch
	// only, the latest a process completed. A home grants under its
	// current epoch with that epoch's liveness alone: learning an epoch
	// ends the one before's (E2), within the step that learns it too.
	liveIn map[procKey]epochLive
	// epochs are every epoch any node learned, by number.
	epochs  map[uint64]msg.Epoch
	firstAt map[uint64]time.Time // when (true time) any process first learned each epoch
	learned map[int]learnedAt
	streaks map[streakKey]*streak
	// heard is the request and attempt of the last Acquire a home acted on,
	// per requester and key.
	heard map[streakKey]heardAttempt
	// answered: the holder nodes whose Reclaim answer each restarted home
	// process has adopted; it adopts one answer from each and ignores
	// later ones.
	answered map[answerKey]bool
	// grantedBy is the home process that granted each delegation, kept
	// after the delegation itself is dropped from delegs: a home re-sends
	// a Grant (same token, echoing the attempt it first answered) when a
	// retransmitted Acquire comes, even late, and that is no new delegation.
	grantedBy map[delegKey]procKey
	// accepts are the Accepted replies sent and acceptances synced (E3).
	accepts accepts
	// bars are the delegations' barriers and writes.
	bars barriers
}

type heardAttempt struct {
	req     msg.RequestID
	attempt uint32
}

type observed struct {
	at   time.Time
	gen  uint64
	env  msg.Envelope
	sent bool
}

type procKey struct {
	node int
	gen  uint64
}

type reqKey struct {
	proc procKey
	key  string
	req  msg.RequestID
}

type attemptSent struct {
	attempt uint32
	at      time.Time
}

// firstSent is when attempt was first sent, among a request's attempts.
func firstSent(sent []attemptSent, attempt uint32) (time.Time, bool) {
	for _, a := range sent {
		if a.attempt == attempt {
			return a.at, true
		}
	}
	return time.Time{}, false
}

type askKey struct {
	node int
	key  string
	req  msg.RequestID
}

type renKey struct {
	proc    procKey
	key     string
	token   fence.Token
	attempt uint32
}

// epochLive is a process's liveness from the rounds of one epoch.
type epochLive struct {
	epoch uint64
	until time.Time // on the node's clock
}

type roundKey struct {
	proc  procKey
	nonce uint64
}

type round struct {
	sentAt time.Time
	epoch  uint64
	ok     map[msg.NodeID]bool
}

type learnedAt struct {
	gen   uint64
	epoch msg.Epoch
}

type streakKey struct {
	home procKey
	key  string
	from msg.NodeID
}

// streak is one requester's uninterrupted wait at a home, as the home
// received it. definite is a lower bound of when the home queued it, latest
// an upper bound (it moves on at every silence after which the home may
// have dropped the waiter as stale, and at every Acquire after a Withdraw
// that may have ended it).
type streak struct {
	definite, latest, lastHeard time.Time // lastHeard on the home's clock
	// reqs are the requests the home's waiter may be under. A waiter keeps
	// the newest request it heard, and a Withdraw of that one ends it; but
	// after a silence the home may have dropped the waiter and queued a new
	// one under whatever arrived next, even an older request replayed late.
	reqs []msg.RequestID
	// maybeGone: a Withdraw matched one of several possible requests, so the
	// home may or may not still keep the waiter (under one of reqs). Such a
	// streak never counts as surely waiting, and it is kept so that, if the
	// home does still keep the waiter, a grant to it is judged from the
	// place it may have kept since definite.
	maybeGone bool
}

// heard updates the waiter's possible requests with a, which the home
// received after a silence long enough to drop the waiter, or after a
// Withdraw that may have ended it, if maybeDropped.
func (st *streak) heard(a msg.RequestID, maybeDropped bool) {
	for i, r := range st.reqs {
		if r.Less(a) {
			st.reqs[i] = a
		}
	}
	if maybeDropped {
		st.reqs = append(st.reqs, a)
	}
	kept := st.reqs[:0]
	for _, r := range st.reqs {
		if !slices.Contains(kept, r) {
			kept = append(kept, r)
		}
	}
	st.reqs = kept
}

// deleg is one delegation as the messages define it.
type deleg struct {
	key    string
	token  fence.Token
	home   procKey
	holder procKey // the process the Grant was addressed to
	req    msg.RequestID
	// homeEnd is the home-side expiry in true time: the home's own send time
	// of the Grant (or of its last ok RenewReply) + lease + Skew on its clock.
	homeEnd time.Time
	// takenEnd is the same for the renewals of other nodes, homes that took
	// it over when its key moved: a restart of the granting node replaces
	// only that node's record (homeEnd), never theirs.
	takenEnd time.Time
	// reportedInc and reportedEnd: the incarnation of the granting node the
	// holder first answered a Reclaim for it, and when (true time) the
	// holder could use it then. The restarted home adopts it for no less,
	// though a home that took it over may renew it past that meanwhile.
	reportedInc uint64
	reportedEnd time.Time
	// over: the holder gave it back (Release, or Withdraw before using it).
	over bool
	// unreported: the holder answered its home's Reclaim without it.
	unreported bool
	// adoptedBy is the restarted home process that adopted it through a
	// Reclaim answer, if one did.
	adoptedBy procKey
	// Holder side, set once the holder's process accepted it.
	accepted  bool
	holderEnd time.Time // on the holder's clock
	// surelyEnd <= holderEnd is how long the holder surely keeps it: a
	// renewal's ok reply that arrives after the holder's lease ran out may
	// find it dropped (its expiry ran) or not (not yet), so it moves only
	// holderEnd, the end it may keep it to.
	surelyEnd    time.Time
	renewedAt    time.Time // when (true time) a RenewReply last extended it
	under        uint64    // the home's epoch when it sent what set holderEnd (L2)
	pendingSince time.Time // a Grant received this step, not yet judged
	contended    bool
	earlyRecall  bool
	recalled     bool
	admits       int
	beforeRecall int
	// dropped: the driver told its holder of a clock jump (harsh.go), which
	// ends every delegation the holder holds (its home does not know), or
	// the holder's Reclaim answer showed it no longer kept it.
	dropped bool
}

// answerKey names a holder node's Reclaim answer to one home process.
type answerKey struct {
	home   procKey
	holder int
}

// New is a checker of the world w.
func New(w World) *Checker {
	if w.Position == nil {
		w.Position = DecimalPosition
	}
	return &Checker{
		w:         w,
		acqSent:   make(map[reqKey][]attemptSent),
		asker:     make(map[askKey]procKey),
		renSent:   make(map[renKey]time.Time),
		delegs:    make(map[string][]*deleg),
		rounds:    make(map[roundKey]*round),
		live:      make(map[procKey]time.Time),
		liveIn:    make(map[procKey]epochLive),
		epochs:    make(map[uint64]msg.Epoch),
		firstAt:   make(map[uint64]time.Time),
		learned:   make(map[int]learnedAt),
		streaks:   make(map[streakKey]*streak),
		heard:     make(map[streakKey]heardAttempt),
		answered:  make(map[answerKey]bool),
		grantedBy: make(map[delegKey]procKey),
		accepts:   make(accepts),
	}
}

// Observe is core.Config.Observe for node n: what its process sent or
// acted on, judged when its step is (Step).
func (c *Checker) Observe(n Node, env msg.Envelope, sent bool) {
	for len(c.pending) <= n.Index() {
		c.pending = append(c.pending, nil)
	}
	c.pending[n.Index()] = append(c.pending[n.Index()], observed{at: c.w.Now(), gen: n.Gen(), env: env, sent: sent})
}

func (c *Checker) fail(inv, format string, args ...any) { c.w.Fail(inv, format, args...) }

func (c *Checker) alive(p procKey) bool {
	n := c.w.Node(p.node)
	return n.Running() && n.Gen() == p.gen
}

func (c *Checker) proc(n Node) procKey { return procKey{n.Index(), n.Gen()} }

// Step judges what n's process did in one step (its Ready's learned
// epoch and events), then the step's events.
func (c *Checker) Step(n Node, learned *epoch.Learned, events []delegation.Event) {
	if learned != nil {
		c.epochs[learned.Epoch.Number] = learned.Epoch
		c.learned[n.Index()] = learnedAt{gen: n.Gen(), epoch: learned.Epoch}
		if _, ok := c.firstAt[learned.Epoch.Number]; !ok && !c.stopped {
			c.firstAt[learned.Epoch.Number] = c.w.Now()
			c.epochBoundAll(learned.Epoch.Number)
		}
	}
	var obs []observed
	if n.Index() < len(c.pending) {
		obs = c.pending[n.Index()]
		c.pending[n.Index()] = obs[:0]
	}
	var granted []*deleg
	// By pointer: an observed carries a whole envelope.
	for i := range obs {
		o := &obs[i]
		if o.gen != n.Gen() || c.stopped {
			continue
		}
		if a, ok := o.env.Body.(msg.Acquire); ok && !o.sent && c.answeredByResend(obs[i+1:], o.env.From.ID, a) {
			continue // a retransmission of a granted request: not queued
		}
		if o.sent {
			c.sent(n, o)
		} else if d := c.received(n, o); d != nil {
			granted = append(granted, d)
		}
	}
	for _, d := range granted {
		c.accept(n, d)
	}
	if learned != nil && !c.stopped {
		c.certified(n, *learned)
	}
	for _, e := range events {
		if c.stopped {
			return
		}
		switch e.Kind {
		case delegation.Admitted:
			c.admitted(n, e)
		case delegation.Extended:
			if d := c.find(e.Key, e.Token.Delegation()); d != nil && d.accepted && e.Expires.After(d.holderEnd) {
				c.fail(InvHolderLease, "%s extended %s %s to %v, past the %v its leases allow",
					n.Name(), e.Key, e.Token, n.TrueAt(e.Expires).Sub(c.w.Base), n.TrueAt(d.holderEnd).Sub(c.w.Base))
			}
		}
	}
}

// answeredByResend: later in the same step the home re-sent the Grant of
// request a to its sender, or refused it, or was not its home: it did not
// queue a.
func (c *Checker) answeredByResend(later []observed, from msg.NodeID, a msg.Acquire) bool {
	for i := range later {
		o := &later[i]
		if !o.sent || o.env.To != from {
			continue
		}
		switch b := o.env.Body.(type) {
		case msg.Grant:
			if b.Key == a.Key && b.Req == a.Req && c.find(b.Key, b.Token) != nil {
				return true
			}
		case msg.Refused:
			if b.Key == a.Key && b.Req == a.Req {
				return true
			}
		case msg.NotHome:
			if b.Key == a.Key && b.Req == a.Req {
				return true
			}
		}
	}
	return false
}

func (c *Checker) find(key string, tok fence.Token) *deleg {
	list := c.delegs[key]
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].token == tok {
			return list[i]
		}
	}
	return nil
}

// liveAtHome: the delegation may still be in use as far as any home may
// assume: its holder has not given it back, its process still runs, and
// its home-side expiry has not passed.
func (c *Checker) liveAtHome(d *deleg) bool {
	// A holder that left it out of its Reclaim answer while it surely held
	// it misled its home: the home's grant then counts against it.
	if d.unreported && !c.surelyValidAtHolder(d) {
		return false
	}
	return !d.over && c.alive(d.holder) && c.w.Now().Before(d.homeUntil())
}

// homeUntil is the latest home-side expiry of any node's record of d.
func (d *deleg) homeUntil() time.Time {
	if d.takenEnd.After(d.homeEnd) {
		return d.takenEnd
	}
	return d.homeEnd
}

// validAtHolder: the holder's process accepted it and may use it now.
func (c *Checker) validAtHolder(d *deleg) bool {
	if !d.accepted || d.over || d.dropped || !c.alive(d.holder) {
		return false
	}
	return c.w.Node(d.holder.node).Local(c.w.Now()).Before(d.holderEnd)
}

// surelyValidAtHolder: the holder's process accepted it and surely still
// keeps it.
func (c *Checker) surelyValidAtHolder(d *deleg) bool {
	return c.validAtHolder(d) && c.w.Node(d.holder.node).Local(c.w.Now()).Before(d.surelyEnd)
}

func (c *Checker) sent(n Node, o *observed) {
	p := c.proc(n)
	switch b := o.env.Body.(type) {
	case msg.Acquire:
		k := reqKey{p, b.Key, b.Req}
		sent := c.acqSent[k]
		if _, ok := firstSent(sent, b.Attempt); !ok {
			c.acqSent[k] = append(sent, attemptSent{b.Attempt, o.at})
		}
		c.asker[askKey{n.Index(), b.Key, b.Req}] = p
	case msg.Renew:
		k := renKey{p, b.Key, b.Token, b.Attempt}
		if _, ok := c.renSent[k]; !ok {
			c.renSent[k] = o.at
		}
	case msg.Renewal:
		k := roundKey{p, b.Nonce}
		if c.rounds[k] == nil {
			c.rounds[k] = &round{sentAt: o.at, epoch: o.env.Epoch, ok: map[msg.NodeID]bool{}}
		}
	case msg.Release:
		c.released(n, b)
		if d := c.find(b.Key, b.Token); d != nil && d.holder.node == n.Index() {
			d.over = true
		}
	case msg.Withdraw:
		for _, d := range c.delegs[b.Key] {
			if d.holder == p && d.req == b.Req && !d.accepted {
				d.over = true
			}
		}
	case msg.Grant:
		c.bars.granted(b)
		c.grantSent(n, o, b)

	case msg.RenewReply:
		if !b.OK {
			return
		}
		c.withinLiveness(n, "renewed", b.Key, b.Token, b.Lease)
		if d := c.find(b.Key, b.Token); d != nil {
			end, last := c.homeEnd(n, b.Lease), &d.takenEnd
			if n.Index() == d.home.node {
				last = &d.homeEnd
			}
			if end.After(*last) {
				*last = end
			}
		}
	case msg.ReclaimAnswer:
		// What the holder leaves out of its answer it says it no longer
		// holds; the restarted home may take it at its word (but D1 still
		// sees whether the word was true). A holder answers for every
		// delegation it keeps from an earlier incarnation of that home,
		// expired or not, so one it may keep only through a renewal reply
		// that came after its lease ran out is one it dropped, and keeps
		// dropped: the reply did not extend it.
		home := c.w.ByID(o.env.To)
		for _, h := range b.Held {
			if d := c.find(h.Key, h.Token); d != nil && d.holder == p && d.reportedInc != b.ForInc {
				d.reportedInc, d.reportedEnd = b.ForInc, time.Time{}
				if c.validAtHolder(d) {
					d.reportedEnd = n.TrueAt(d.holderEnd)
				}
			}
		}
		for _, list := range c.delegs {
			for _, d := range list {
				if d.holder == p && home != nil && d.home.node == home.Index() && !reported(b.Held, d) {
					d.unreported = true
					if d.token.Incarnation < b.ForInc && c.validAtHolder(d) && !c.surelyValidAtHolder(d) {
						d.dropped = true
					}
				}
			}
		}
	case msg.NotHome:
		c.endStreak(p, b.Key, o.env.To)
	case msg.Refused:
		c.endStreak(p, b.Key, o.env.To)
	case msg.Accepted:
		c.accepts.sent(n.Name(), b)
	}
}

func reported(held []msg.HeldDelegation, d *deleg) bool {
	for _, h := range held {
		if h.Key == d.key && h.Token == d.token {
			return true
		}
	}
	return false
}

func (c *Checker) homeEnd(n Node, lease time.Duration) time.Time {
	return n.TrueAt(n.Local(c.w.Now()).Add(lease + c.w.Skew))
}

// withinLiveness: a home hands out no lease past its epoch liveness, as
// derived from the renewal rounds it sent and the ok answers it received.
func (c *Checker) withinLiveness(n Node, what, key string, tok fence.Token, lease time.Duration) {
	l, ok := c.learnedBy(n)
	if !ok || l.Majority() <= 1 {
		return // a lone member's rounds send nothing to observe
	}
	var until time.Time
	if in := c.liveIn[c.proc(n)]; in.epoch == l.Number {
		until = in.until
	}
	end := n.Local(c.w.Now()).Add(lease)
	switch {
	case until.IsZero():
		c.fail(InvLiveness, "%s %s %s %s with a lease to %v, with no liveness yet in epoch %d",
			n.Name(), what, key, tok, n.TrueAt(end).Sub(c.w.Base), l.Number)
	case end.After(until):
		c.fail(InvLiveness, "%s %s %s %s with a lease to %v, past its liveness %v in epoch %d",
			n.Name(), what, key, tok, n.TrueAt(end).Sub(c.w.Base), n.TrueAt(until).Sub(c.w.Base), l.Number)
	}
}

func (c *Checker) grantSent(n Node, o *observed, g msg.Grant) {
	if d := c.find(g.Key, g.Token); d != nil && d.home.node == n.Index() {
		c.answeredRequest(n, g, o.env.To)
		return // a re-sent Grant: no new delegation, no new expiry
	}
	if p, ok := c.grantedBy[delegKey{g.Key, g.Token}]; ok && p == c.proc(n) {
		// Re-sent after the delegation ended as far as the checker is
		// concerned (here a home resumed from a pause answers a deferred
		// retransmission before its first tick expires the delegation):
		// the Grant echoes the attempt it first answered, so its holder
		// anchors the lease there and gains nothing (D1 still judges it).
		c.answeredRequest(n, g, o.env.To)
		return
	}
	c.grantedBy[delegKey{g.Key, g.Token}] = c.proc(n)
	to := c.w.ByID(o.env.To)
	if to == nil {
		return
	}
	c.withinLiveness(n, "granted", g.Key, g.Token, g.Lease)
	for _, o := range c.delegs[g.Key] {
		if c.liveAtHome(o) {
			c.fail(InvHomeView, "%s granted %s %s while %s (granted by %s to %s) may be live until %v",
				n.Name(), g.Key, g.Token, o.token, c.w.Node(o.home.node).Name(), c.w.Node(o.holder.node).Name(), o.homeUntil().Sub(c.w.Base))
			// The delegation exists all the same: a script that goes on
			// sees what its holder does with it (D1), not a follow-on.
			break
		}
	}
	c.fifo(n, g, to.Name())
	if h, ok := c.heard[streakKey{c.proc(n), g.Key, to.Name()}]; ok && h.req == g.Req && h.attempt != g.Attempt {
		c.fail(InvEcho, "%s granted %s %s echoing attempt #%d of %v, but the last it heard was #%d",
			n.Name(), g.Key, g.Token, g.Attempt, g.Req, h.attempt)
	}
	holder, ok := c.asker[askKey{to.Index(), g.Key, g.Req}]
	if !ok {
		holder = c.proc(to)
	}
	d := &deleg{
		key: g.Key, token: g.Token, home: c.proc(n), holder: holder, req: g.Req,
		homeEnd: c.homeEnd(n, g.Lease), contended: g.Contended,
	}
	// Keep only what can still matter: delegations live on either side, or
	// whose Grant may still arrive (a home that reclaimed no longer counts
	// those, but a holder that takes one holds it).
	list := c.delegs[g.Key][:0]
	for _, o := range c.delegs[g.Key] {
		if c.validAtHolder(o) || (!o.over && c.alive(o.holder) && c.w.Now().Before(o.homeUntil())) {
			list = append(list, o)
		}
	}
	c.delegs[g.Key] = append(list, d)
}

// received handles what a process acted on; it returns a delegation whose
// Grant this process received and must be judged at the step's end.
func (c *Checker) received(n Node, o *observed) *deleg {
	p := c.proc(n)
	switch b := o.env.Body.(type) {
	case msg.Grant:
		d := c.find(b.Key, b.Token)
		if d == nil || d.accepted || d.holder != p {
			return nil
		}
		if b.Recalled {
			d.earlyRecall = true
		}
		anchor, ok := firstSent(c.acqSent[reqKey{p, b.Key, b.Req}], b.Attempt)
		end := time.Time{}
		if ok {
			end = n.Local(anchor).Add(b.Lease - time.Duration(float64(b.Lease)*c.w.Drift))
		}
		d.pendingSince, d.holderEnd, d.under = o.at, end, o.env.Epoch
		return d
	case msg.RenewReply:
		d := c.find(b.Key, b.Token)
		// A Grant received in this very step is held as far as its renewal
		// goes (a home's own delegation renews within the step that granted
		// it); accept judges it at the step's end with the renewed lease.
		pending := d != nil && !d.accepted && !d.pendingSince.IsZero() && !d.holderEnd.IsZero()
		if d == nil || d.holder != p || d.over || !(d.accepted || pending) {
			return nil
		}
		if !b.OK {
			c.recall(d)
			return nil
		}
		sent, ok := c.renSent[renKey{p, b.Key, b.Token, b.Attempt}]
		if !ok || sent.Before(d.renewedAt) {
			// A holder that renewed forgets its earlier attempts: a late
			// reply to one of them extends nothing (delegation.RenewReply).
			return nil
		}
		end := n.Local(sent).Add(b.Lease - time.Duration(float64(b.Lease)*c.w.Drift))
		if d.accepted && n.Local(o.at).Before(d.surelyEnd) && end.After(d.surelyEnd) {
			d.surelyEnd = end
		}
		if end.After(d.holderEnd) {
			d.holderEnd, d.under, d.renewedAt = end, o.env.Epoch, o.at
			if d.accepted {
				c.exclusive(n, d)
				c.epochBound(d)
			}
		}
	case msg.Recall:
		d := c.find(b.Key, b.Token)
		if d == nil || d.holder != p {
			return nil
		}
		if !d.accepted {
			d.earlyRecall = true
			return nil
		}
		c.recall(d)
	case msg.RenewalAnswer:
		r := c.rounds[roundKey{p, b.Nonce}]
		if r == nil || b.Result != msg.RenewalOK {
			return nil
		}
		e, known := c.epochs[r.epoch]
		if !known {
			return nil
		}
		if _, member := e.Member(o.env.From.ID); member {
			r.ok[o.env.From.ID] = true
		}
		if len(r.ok)+1 >= e.Majority() {
			end := n.Local(r.sentAt).Add(time.Duration(float64(c.w.EpochLease) * (1 - c.w.Drift)))
			if end.After(c.live[p]) {
				c.live[p] = end
			}
			if in := c.liveIn[p]; r.epoch > in.epoch || (r.epoch == in.epoch && end.After(in.until)) {
				c.liveIn[p] = epochLive{epoch: r.epoch, until: end}
			}
		}
	case msg.ReclaimAnswer:
		// The restarted home adopts each reported delegation for the
		// holder's remaining lease + Skew, measured from its receipt, from
		// the first answer each holder gives to a Reclaim of this
		// incarnation: it ignores an answer to another incarnation's
		// Reclaim and a holder's later answers (a resent Reclaim answered
		// twice, a duplicate). The holder's lease cannot grow after its
		// first answer (the restarted home renews nothing it did not
		// adopt), so that answer bounds it.
		from := c.w.ByID(o.env.From.ID)
		ak := answerKey{p, from.Index()}
		if b.ForInc != n.Inc() || c.answered[ak] {
			break
		}
		c.answered[ak] = true
		for _, h := range b.Held {
			d := c.find(h.Key, h.Token)
			if d == nil || d.holder.node != from.Index() {
				continue
			}
			// A renewal this home process grants later lengthens it again.
			d.homeEnd, d.adoptedBy = c.homeEnd(n, h.Remaining), p
			// Judged against what the holder could use when it answered
			// (seeds 350,550 and 786,448): a home it was handed over to
			// may have renewed it since, and keeps its own record of that.
			if c.validAtHolder(d) && d.reportedInc == b.ForInc && d.reportedEnd.After(d.homeEnd) {
				c.fail(InvHolderFirst, "%s adopted %s %s until %v, but its holder could use it until %v when it answered",
					n.Name(), h.Key, h.Token, d.homeEnd.Sub(c.w.Base), d.reportedEnd.Sub(c.w.Base))
				return nil
			}
		}
	case msg.Acquire:
		c.acquireReceived(n, o, b)
	case msg.Withdraw:
		// The home drops the waiter only if it waits for this request: the
		// newest it heard while the waiter was queued (a late retransmission
		// of a request granted since queues anew, under that old request).
		// Where the checker cannot tell which, the wait may be over or not.
		if st := c.dropRequest(p, b.Key, o.env.From.ID, b.Req); st != nil {
			st.maybeGone = true
		}
		// A delegation granted to the withdrawn request is over at its home
		// (the holder sent Withdraw while the request was outstanding, so it
		// may never accept that Grant): from here on the home view is that
		// it is not live, and a holder that accepts it anyway holds it past
		// its home's expiry (D5).
		for _, d := range c.delegs[b.Key] {
			if d.home == p && d.req == b.Req && !d.accepted && c.w.Node(d.holder.node).Name() == o.env.From.ID && c.w.Now().Before(d.homeEnd) {
				d.homeEnd = c.w.Now()
			}
		}
	}
	return nil
}

func (c *Checker) recall(d *deleg) {
	if !d.recalled {
		d.recalled, d.beforeRecall = true, d.admits
	}
}

// accept judges a Grant at the end of the step that received it: unless the
// step gave it back, the holder holds it from now until the echoed attempt's
// send + lease shortened by the drift bound, on its own clock.
func (c *Checker) accept(n Node, d *deleg) {
	if d.over || d.pendingSince.IsZero() {
		return
	}
	d.pendingSince = time.Time{}
	if d.holderEnd.IsZero() {
		c.fail(InvHolderLease, "%s kept %s %s though it never sent the attempt the Grant echoes", n.Name(), d.key, d.token)
		return
	}
	d.accepted, d.surelyEnd = true, d.holderEnd
	c.exclusive(n, d)
	c.epochBound(d)
}

// epochBound: a lease a home issued in epoch n is clamped to its liveness
// in n, and no majority renews that liveness once it has promised n+1, so
// the holder's use of it ends within EpochLease + Skew of the first moment
// anyone learned a later epoch: what every later home's activation gate
// waits out (docs/design.md). Judged from the epochs learned and the true
// time, not from the liveness the checker derives for L1 (whose rounds it
// takes the answers of at their word).
func (c *Checker) epochBound(d *deleg) {
	if !c.validAtHolder(d) {
		return
	}
	first := time.Time{}
	for num, at := range c.firstAt {
		if num > d.under && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if first.IsZero() {
		return
	}
	if end := c.w.Node(d.holder.node).TrueAt(d.holderEnd); end.After(first.Add(c.w.EpochLease + c.w.Skew)) {
		c.fail(InvEpochBound, "%s holds %s %s, leased in epoch %d, until %v: more than EpochLease + Skew after a later epoch was first learned at %v",
			c.w.Node(d.holder.node).Name(), d.key, d.token, d.under, end.Sub(c.w.Base), first.Sub(c.w.Base))
	}
}

// epochBoundAll applies epochBound to every delegation held when epoch num
// is first learned.
func (c *Checker) epochBoundAll(num uint64) {
	for _, key := range slices.Sorted(maps.Keys(c.delegs)) {
		for _, d := range c.delegs[key] {
			if d.accepted && d.under < num {
				c.epochBound(d)
			}
		}
	}
}

// exclusive checks D1 and D5 whenever d becomes valid or is extended.
func (c *Checker) exclusive(n Node, d *deleg) {
	if !c.validAtHolder(d) {
		return
	}
	end := n.TrueAt(d.holderEnd)
	if home := d.homeUntil(); end.After(home) {
		c.fail(InvHolderFirst, "%s holds %s %s until %v, past its home's expiry %v",
			n.Name(), d.key, d.token, end.Sub(c.w.Base), home.Sub(c.w.Base))
		return
	}
	for _, o := range c.delegs[d.key] {
		if o != d && c.validAtHolder(o) {
			c.fail(InvDelegExclusion, "%s holds %s %s from %v while %s holds %s until %v",
				n.Name(), d.key, d.token, c.w.Now().Sub(c.w.Base), c.w.Node(o.holder.node).Name(), o.token,
				c.w.Node(o.holder.node).TrueAt(o.holderEnd).Sub(c.w.Base))
			return
		}
	}
}

func (c *Checker) learnedBy(n Node) (msg.Epoch, bool) {
	if l, ok := c.learned[n.Index()]; ok && l.gen == n.Gen() {
		return l.epoch, true
	}
	if n.Learned() != nil {
		return n.Learned().Epoch, true
	}
	return msg.Epoch{}, false
}

func (c *Checker) admitted(n Node, e delegation.Event) {
	if l, ok := c.learnedBy(n); ok {
		for _, m := range l.Members {
			if m.Version != n.Version() {
				c.fail(InvFailClosedEp, "%s (v%d) admitted %s in epoch %d, where %s runs v%d",
					n.Name(), n.Version(), e.Key, l.Number, m.ID, m.Version)
				return
			}
		}
	}
	d := c.find(e.Key, e.Token.Delegation())
	switch {
	case d == nil || d.holder != c.proc(n) || !d.accepted:
		c.fail(InvHolderLease, "%s admitted %s under %s, which it never accepted", n.Name(), e.Key, e.Token)
	case !c.validAtHolder(d):
		c.fail(InvHolderLease, "%s admitted %s under %s after it ended", n.Name(), e.Key, e.Token)
	case e.Expires.After(d.holderEnd):
		c.fail(InvHolderLease, "%s admitted %s under %s until %v, past the %v its leases allow",
			n.Name(), e.Key, e.Token, n.TrueAt(e.Expires).Sub(c.w.Base), n.TrueAt(d.holderEnd).Sub(c.w.Base))
	case d.earlyRecall && d.admits >= 1:
		c.fail(InvRecall, "%s admitted %s under %s a second time, recalled before it arrived", n.Name(), e.Key, e.Token)
	case d.contended && d.admits >= 1:
		c.fail(InvRecall, "%s admitted %s under the contended %s a second time", n.Name(), e.Key, e.Token)
	case d.recalled && (d.beforeRecall > 0 || d.admits > d.beforeRecall):
		c.fail(InvRecall, "%s admitted %s under %s after its Recall", n.Name(), e.Key, e.Token)
	}
	if d != nil {
		d.admits++
	}
}

// acquireReceived follows a requester's wait at a home from the Acquires
// the home acted on.
func (c *Checker) acquireReceived(n Node, o *observed, a msg.Acquire) {
	k := streakKey{c.proc(n), a.Key, o.env.From.ID}
	if h, ok := c.heard[k]; !ok || !a.Req.Less(h.req) {
		c.heard[k] = heardAttempt{a.Req, a.Attempt}
	}
	now := n.Local(o.at)
	st := c.streaks[k]
	if st == nil {
		c.streaks[k] = &streak{definite: o.at, latest: o.at, lastHeard: now, reqs: []msg.RequestID{a.Req}}
		return
	}
	maybeDropped := st.maybeGone || now.Sub(st.lastHeard) >= home.StaleWaiters*c.w.Retry-time.Millisecond
	st.heard(a.Req, maybeDropped)
	if maybeDropped {
		st.latest = o.at
	}
	st.lastHeard, st.maybeGone = now, false
}

// answeredRequest: a re-sent Grant answers its request with the delegation
// the home keeps for it, and the home queues no waiter under a request its
// live delegation answers (home.Machine.Acquire), so that request no longer
// waits there. Without this, a retransmission a home answered after a pause
// counted as the requester queued from then on, and its next request as the
// same wait (seed 250,833: FIFO judged from the old request's receipt).
func (c *Checker) answeredRequest(n Node, g msg.Grant, to msg.NodeID) {
	c.dropRequest(c.proc(n), g.Key, to, g.Req)
}

// dropRequest takes req out of from's wait for key at home, ending the wait
// when no request of it is left. It returns the wait if req was in it and
// others remain, and nil otherwise.
func (c *Checker) dropRequest(home procKey, key string, from msg.NodeID, req msg.RequestID) *streak {
	st := c.streaks[streakKey{home, key, from}]
	if st == nil {
		return nil
	}
	i := slices.Index(st.reqs, req)
	if i < 0 {
		return nil
	}
	st.reqs = slices.Delete(st.reqs, i, i+1)
	if len(st.reqs) == 0 {
		c.endStreak(home, key, from)
		return nil
	}
	return st
}

func (c *Checker) endStreak(home procKey, key string, from msg.NodeID) {
	delete(c.streaks, streakKey{home, key, from})
}

// fifo: a fresh grant goes to no requester that the home surely queued
// after another one it surely still keeps.
func (c *Checker) fifo(n Node, g msg.Grant, to msg.NodeID) {
	p := c.proc(n)
	r := c.streaks[streakKey{p, g.Key, to}]
	c.endStreak(p, g.Key, to)
	if r == nil {
		return
	}
	// A grant of an older request than one the streak heard: either the home
	// heard the newer one after it granted, in the same step (a holder that
	// gives back a delegation asks again at once, and its new home may still
	// keep the request an old home answered), and that one waits anew from
	// now; or, after a silence, the home's waiter was under the older one
	// and the newer is gone with it. So the requester may wait, from now at
	// the earliest: a grant to it is judged from now, and it never counts
	// as surely waiting until it is heard again (seeds 56,007 and 642).
	if newer := slices.DeleteFunc(slices.Clone(r.reqs), func(q msg.RequestID) bool { return !g.Req.Less(q) }); len(newer) > 0 {
		at := c.w.Now()
		c.streaks[streakKey{p, g.Key, to}] = &streak{definite: at, latest: at, lastHeard: r.lastHeard, reqs: newer, maybeGone: true}
	}
	now := n.Local(c.w.Now())
	var first *streak
	var firstFrom msg.NodeID
	for k, q := range c.streaks {
		if k.home != p || k.key != g.Key || k.from == to {
			continue
		}
		if q.maybeGone || now.Sub(q.lastHeard) >= home.StaleWaiters*c.w.Retry-time.Millisecond || !q.latest.Before(r.definite) {
			continue
		}
		if first == nil || q.latest.Before(first.latest) || (q.latest.Equal(first.latest) && k.from < firstFrom) {
			first, firstFrom = q, k.from
		}
	}
	if first != nil {
		c.fail(InvFIFOReceipt, "%s granted %s (%s) to %s, queued at %v, while %s, queued by %v, still waits",
			n.Name(), g.Key, g.Token, to, r.definite.Sub(c.w.Base), firstFrom, first.latest.Sub(c.w.Base))
	}
}

// InvBarrier: a barrier handed on never goes backwards. A holder that
// releases with a barrier states one at least the one it inherited and at
// least its own writes' position; otherwise its successor's wait hook may
// return before the store caught up with writes made under the lock (H18,
// H20).
const InvBarrier = "B1 barriers never go backwards"

// DecimalPosition reads a barrier that is a store position in decimal
// (-1: none), as the cluster simulator's store writes them.
func DecimalPosition(b []byte) int {
	if b == nil {
		return -1
	}
	v, err := strconv.Atoi(string(b))
	if err != nil {
		return -1
	}
	return v
}

type delegKey struct {
	key   string
	token fence.Token
}

// barriers is what the independent checker knows of each delegation's
// barriers: the one its Grant carried, and its holder's newest write.
type barriers struct {
	inherited map[delegKey][]byte
	written   map[delegKey]int
	// released: the first Release was judged. Later ones answer duplicated
	// Grants or Recalls with whatever barrier the Grant carried, and the
	// home, whose delegation is over, ignores them.
	released map[delegKey]bool
}

func (b *barriers) init() {
	if b.inherited == nil {
		b.inherited, b.written, b.released = make(map[delegKey][]byte), make(map[delegKey]int), make(map[delegKey]bool)
	}
}

func (b *barriers) granted(g msg.Grant) {
	b.init()
	k := delegKey{g.Key, g.Token}
	if _, ok := b.inherited[k]; !ok {
		b.inherited[k] = g.Barrier
	}
}

// wrote records a write committed at version under section token tok.
func (b *barriers) wrote(key string, tok fence.Token, version int) {
	b.init()
	k := delegKey{key, tok.Delegation()}
	b.written[k] = max(b.written[k], version)
}

// released checks B1 on a Release n sent.
func (c *Checker) released(n Node, r msg.Release) {
	k := delegKey{r.Key, r.Token}
	inh, ok := c.bars.inherited[k]
	if !ok || c.bars.released[k] {
		return // never granted as far as the checker saw, or judged
	}
	c.bars.released[k] = true
	d := c.find(r.Key, r.Token)
	if d == nil || !c.liveAtHome(d) {
		// No home can still hand this barrier on as a clean handoff's: the
		// delegation expired at its home, or its holder's process is gone
		// (this Release answers a Grant or Recall that outlived it), and
		// after an expiry or a holder's crash only exclusion is promised,
		// not freshness (docs/design.md, Successor freshness).
		return
	}
	got := c.w.Position(r.Barrier)
	if r.Barrier == nil {
		// No barrier stated: the home hands on the one it gave. That is
		// right for a delegation the holder no longer holds (it answers a
		// Recall for a token it lost, as when a delegation expires), not
		// for one it gives back while valid after writing under it.
		if d.holder != c.proc(n) || !c.validAtHolder(d) {
			return
		}
		got = c.w.Position(inh)
	}
	if want := c.w.Position(inh); got < want {
		c.fail(InvBarrier, "%s released %s %s with barrier %d, below the %d it inherited", n.Name(), r.Key, r.Token, got, want)
		return
	}
	if w, ok := c.bars.written[k]; ok && got < w {
		c.fail(InvBarrier, "%s released %s %s with barrier %d, below its own write at %d", n.Name(), r.Key, r.Token, got, w)
	}
}

// InvCertificate: a certificate is what the acceptors said, not what the
// proposer counted. Agreement rests on it (E1), but a fork needs a second
// proposer at the wrong moment; a certificate that names an acceptor twice,
// or one that never accepted the ballot, is wrong the moment it is learned.
const InvCertificate = "E3 certificates name a majority that accepted"

// accepts records every Accepted(OK) any process sent, by acceptor,
// instance and ballot.
type accepts map[acceptKey]bool

type acceptKey struct {
	from     msg.NodeID
	instance uint64
	ballot   msg.Ballot
}

// synced records the acceptances a process wrote to its disk: a proposer's
// own acceptor answers it within the step, with no message to observe.
func (a accepts) synced(n Node, recs []epoch.AcceptorRecord) {
	for _, r := range recs {
		if !r.Accepted.IsZero() {
			a[acceptKey{n.Name(), r.Instance, r.Accepted}] = true
		}
	}
}

func (a accepts) sent(from msg.NodeID, b msg.Accepted) {
	if b.OK {
		a[acceptKey{from, b.Instance, b.Ballot}] = true
	}
}

// certified checks the certificate of an epoch n learned: distinct members
// of the previous epoch, a majority of it, each of which sent Accepted for
// the certificate's ballot in instance Epoch.Number.
func (c *Checker) certified(n Node, l epoch.Learned) {
	if l.Epoch.Number == 0 || l.Cert.Ballot.IsZero() {
		return
	}
	seen := make(map[msg.NodeID]bool, len(l.Cert.Acceptors))
	for _, a := range l.Cert.Acceptors {
		switch {
		case seen[a.ID]:
			c.fail(InvCertificate, "%s learned epoch %d with a certificate naming %s twice", n.Name(), l.Epoch.Number, a.ID)
			return
		case !c.accepts[acceptKey{a.ID, l.Epoch.Number, l.Cert.Ballot}]:
			c.fail(InvCertificate, "%s learned epoch %d with a certificate naming %s, which never accepted ballot %v",
				n.Name(), l.Epoch.Number, a.ID, l.Cert.Ballot)
			return
		}
		seen[a.ID] = true
	}
	if len(seen) < l.Cert.Prev.Majority() {
		c.fail(InvCertificate, "%s learned epoch %d from %d acceptors of %d", n.Name(), l.Epoch.Number, len(seen), len(l.Cert.Prev.Members))
	}
}

// ClockJumped: n's driver called ClockJump, an input as a crash is: every
// delegation n's process holds ends for it then (its home still waits out
// its own expiry).
func (c *Checker) ClockJumped(n Node) {
	p := c.proc(n)
	for _, list := range c.delegs {
		for _, d := range list {
			if d.holder == p && d.accepted {
				d.dropped = true
			}
		}
	}
}
