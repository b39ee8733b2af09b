package clustertest

import (
	"maps"
	"slices"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/msg"
)

// Invariants the independent checker owns. It re-derives them from the
// messages each process sent and acted on, the true time, the clocks' rates
// and the configured bounds, never from a machine's own state.
const (
	invDelegExclusion = "D1 one valid delegation per key"
	invHolderLease    = "D2 holder within its derived lease"
	invRecall         = "D3 no new admission after a recall"
	invHomeView       = "D4 no grant while another delegation may be live (home view)"
	invHolderFirst    = "D5 holder expires before its home"
	invLiveness       = "L1 lease within the home's liveness"
	invEpochBound     = "L2 epoch n's delegations end within EpochLease + Skew of n+1"
	invFIFOReceipt    = "fairness: FIFO by receipt"
	invFailClosedEp   = "V1 fail closed (learned epochs)"
	invEcho           = "H22 a grant echoes the last attempt heard"
)

// independent is the second checker. Every process's observed messages are
// buffered during its step and judged when the step's Ready is applied, so
// that what a step did as a whole (a Grant received and released at once)
// counts, not the order of lines within it.
type independent struct {
	s *Sim
	// pending holds, per node index, what its process observed in the
	// current step.
	pending [][]observed

	acqSent map[acqKey]time.Time // first true send time of each attempt
	// asker is the process that sent each request: a Grant is for it, even
	// when the node has restarted since (its new process refuses it).
	asker   map[askKey]procKey
	renSent map[renKey]time.Time
	delegs  map[string][]*deleg // by key, every delegation still of interest
	rounds  map[roundKey]*round
	live    map[procKey]time.Time // liveness on the node's clock
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
	// accepts are the Accepted replies sent (certificates.go).
	accepts accepts
	// barriers are the delegations' barriers and writes (barriers.go).
	barriers barriers
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

type acqKey struct {
	proc    procKey
	key     string
	req     msg.RequestID
	attempt uint32
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
// have dropped the waiter as stale).
type streak struct {
	definite, latest, lastHeard time.Time // lastHeard on the home's clock
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
	// over: the holder gave it back (Release, or Withdraw before using it).
	over bool
	// unreported: the holder answered its home's Reclaim without it.
	unreported bool
	// adoptedBy is the restarted home process that adopted it through a
	// Reclaim answer, if one did.
	adoptedBy procKey
	// Holder side, set once the holder's process accepted it.
	accepted     bool
	holderEnd    time.Time // on the holder's clock
	under        uint64    // the home's epoch when it sent what set holderEnd (L2)
	pendingSince time.Time // a Grant received this step, not yet judged
	contended    bool
	earlyRecall  bool
	recalled     bool
	admits       int
	beforeRecall int
	// dropped: the driver told its holder of a clock jump (harsh.go), which
	// ends every delegation the holder holds; its home does not know.
	dropped bool
}

// answerKey names a holder node's Reclaim answer to one home process.
type answerKey struct {
	home   procKey
	holder int
}

func newIndependent(s *Sim) *independent {
	return &independent{
		s:         s,
		acqSent:   make(map[acqKey]time.Time),
		asker:     make(map[askKey]procKey),
		renSent:   make(map[renKey]time.Time),
		delegs:    make(map[string][]*deleg),
		rounds:    make(map[roundKey]*round),
		live:      make(map[procKey]time.Time),
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

// observe is core.Config.Observe for node n.
func (c *independent) observe(n *simNode, env msg.Envelope, sent bool) {
	for len(c.pending) <= n.idx {
		c.pending = append(c.pending, nil)
	}
	c.pending[n.idx] = append(c.pending[n.idx], observed{at: c.s.now, gen: n.gen, env: env, sent: sent})
}

func (c *independent) fail(inv, format string, args ...any) { c.s.check.fail(inv, format, args...) }

func (c *independent) alive(p procKey) bool {
	n := c.s.nodes[p.node]
	return n.core != nil && n.gen == p.gen
}

func (c *independent) proc(n *simNode) procKey { return procKey{n.idx, n.gen} }

// step judges what n's process did in one step, then the step's events.
func (c *independent) step(n *simNode, learned *epoch.Learned, events []delegation.Event) {
	if learned != nil {
		c.epochs[learned.Epoch.Number] = learned.Epoch
		c.learned[n.idx] = learnedAt{gen: n.gen, epoch: learned.Epoch}
		if _, ok := c.firstAt[learned.Epoch.Number]; !ok && !c.s.stopped {
			c.firstAt[learned.Epoch.Number] = c.s.now
			c.epochBoundAll(learned.Epoch.Number)
		}
	}
	var obs []observed
	if n.idx < len(c.pending) {
		obs = c.pending[n.idx]
		c.pending[n.idx] = obs[:0]
	}
	var granted []*deleg
	for i, o := range obs {
		if o.gen != n.gen || c.s.stopped {
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
	if learned != nil && !c.s.stopped {
		c.certified(n, *learned)
	}
	for _, e := range events {
		if c.s.stopped {
			return
		}
		switch e.Kind {
		case delegation.Admitted:
			c.admitted(n, e)
		case delegation.Extended:
			if d := c.find(e.Key, e.Token.Delegation()); d != nil && d.accepted && e.Expires.After(d.holderEnd) {
				c.fail(invHolderLease, "%s extended %s %s to %v, past the %v its leases allow",
					n.id, e.Key, e.Token, n.trueAt(e.Expires).Sub(simBase), n.trueAt(d.holderEnd).Sub(simBase))
			}
		}
	}
}

// answeredByResend: later in the same step the home re-sent the Grant of
// request a to its sender, or refused it, or was not its home: it did not
// queue a.
func (c *independent) answeredByResend(later []observed, from msg.NodeID, a msg.Acquire) bool {
	for _, o := range later {
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

func (c *independent) find(key string, tok fence.Token) *deleg {
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
func (c *independent) liveAtHome(d *deleg) bool {
	if d.unreported && !c.validAtHolder(d) {
		return false
	}
	return !d.over && c.alive(d.holder) && c.s.now.Before(d.homeEnd)
}

// validAtHolder: the holder's process accepted it and may use it now.
func (c *independent) validAtHolder(d *deleg) bool {
	if !d.accepted || d.over || d.dropped || !c.alive(d.holder) {
		return false
	}
	return c.s.nodes[d.holder.node].local(c.s.now).Before(d.holderEnd)
}

func (c *independent) sent(n *simNode, o observed) {
	p := c.proc(n)
	switch b := o.env.Body.(type) {
	case msg.Acquire:
		k := acqKey{p, b.Key, b.Req, b.Attempt}
		if _, ok := c.acqSent[k]; !ok {
			c.acqSent[k] = o.at
		}
		c.asker[askKey{n.idx, b.Key, b.Req}] = p
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
		if d := c.find(b.Key, b.Token); d != nil && d.holder.node == n.idx {
			d.over = true
		}
	case msg.Withdraw:
		for _, d := range c.delegs[b.Key] {
			if d.holder == p && d.req == b.Req && !d.accepted {
				d.over = true
			}
		}
	case msg.Grant:
		c.barriers.granted(b)
		c.grantSent(n, o, b)
	case msg.RenewReply:
		if !b.OK {
			return
		}
		c.withinLiveness(n, "renewed", b.Key, b.Token, b.Lease)
		if d := c.find(b.Key, b.Token); d != nil {
			if end := c.homeEnd(n, b.Lease); end.After(d.homeEnd) {
				d.homeEnd = end
			}
		}
	case msg.ReclaimAnswer:
		// What the holder leaves out of its answer it says it no longer
		// holds; the restarted home may take it at its word (but D1 still
		// sees whether the word was true).
		home := c.s.nodeByID(o.env.To)
		for _, list := range c.delegs {
			for _, d := range list {
				if d.holder == p && home != nil && d.home.node == home.idx && !reported(b.Held, d) {
					d.unreported = true
				}
			}
		}
	case msg.NotHome:
		c.endStreak(p, b.Key, o.env.To)
	case msg.Refused:
		c.endStreak(p, b.Key, o.env.To)
	case msg.Accepted:
		c.accepts.sent(n.id, b)
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

func (c *independent) homeEnd(n *simNode, lease time.Duration) time.Time {
	return n.trueAt(n.local(c.s.now).Add(lease + simSkew))
}

// withinLiveness: a home hands out no lease past its epoch liveness, as
// derived from the renewal rounds it sent and the ok answers it received.
func (c *independent) withinLiveness(n *simNode, what, key string, tok fence.Token, lease time.Duration) {
	l, ok := c.learnedBy(n)
	if !ok || l.Majority() <= 1 {
		return // a lone member's rounds send nothing to observe
	}
	until := c.live[c.proc(n)]
	if end := n.local(c.s.now).Add(lease); end.After(until) {
		c.fail(invLiveness, "%s %s %s %s with a lease to %v, past its liveness %v",
			n.id, what, key, tok, n.trueAt(end).Sub(simBase), n.trueAt(until).Sub(simBase))
	}
}

func (c *independent) grantSent(n *simNode, o observed, g msg.Grant) {
	if d := c.find(g.Key, g.Token); d != nil && d.home.node == n.idx {
		return // a re-sent Grant: no new delegation, no new expiry
	}
	if p, ok := c.grantedBy[delegKey{g.Key, g.Token}]; ok && p == c.proc(n) {
		// Re-sent after the delegation ended as far as the checker is
		// concerned (here a home resumed from a pause answers a deferred
		// retransmission before its first tick expires the delegation):
		// the Grant echoes the attempt it first answered, so its holder
		// anchors the lease there and gains nothing (D1 still judges it).
		return
	}
	c.grantedBy[delegKey{g.Key, g.Token}] = c.proc(n)
	to := c.s.nodeByID(o.env.To)
	if to == nil {
		return
	}
	c.withinLiveness(n, "granted", g.Key, g.Token, g.Lease)
	for _, o := range c.delegs[g.Key] {
		if c.liveAtHome(o) {
			c.fail(invHomeView, "%s granted %s %s while %s (granted by %s to %s) may be live until %v",
				n.id, g.Key, g.Token, o.token, c.s.nodes[o.home.node].id, c.s.nodes[o.holder.node].id, o.homeEnd.Sub(simBase))
			return
		}
	}
	c.fifo(n, g, to.id)
	if h, ok := c.heard[streakKey{c.proc(n), g.Key, to.id}]; ok && h.req == g.Req && h.attempt != g.Attempt {
		c.fail(invEcho, "%s granted %s %s echoing attempt #%d of %v, but the last it heard was #%d",
			n.id, g.Key, g.Token, g.Attempt, g.Req, h.attempt)
	}
	holder, ok := c.asker[askKey{to.idx, g.Key, g.Req}]
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
		if c.validAtHolder(o) || (!o.over && c.alive(o.holder) && c.s.now.Before(o.homeEnd)) {
			list = append(list, o)
		}
	}
	c.delegs[g.Key] = append(list, d)
}

// received handles what a process acted on; it returns a delegation whose
// Grant this process received and must be judged at the step's end.
func (c *independent) received(n *simNode, o observed) *deleg {
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
		anchor, ok := c.acqSent[acqKey{p, b.Key, b.Req, b.Attempt}]
		end := time.Time{}
		if ok {
			end = n.local(anchor).Add(b.Lease - time.Duration(float64(b.Lease)*simDrift))
		}
		d.pendingSince, d.holderEnd, d.under = o.at, end, o.env.Epoch
		return d
	case msg.RenewReply:
		d := c.find(b.Key, b.Token)
		if d == nil || d.holder != p || !d.accepted || d.over {
			return nil
		}
		if !b.OK {
			c.recall(d)
			return nil
		}
		sent, ok := c.renSent[renKey{p, b.Key, b.Token, b.Attempt}]
		if !ok {
			return nil
		}
		if end := n.local(sent).Add(b.Lease - time.Duration(float64(b.Lease)*simDrift)); end.After(d.holderEnd) {
			d.holderEnd, d.under = end, o.env.Epoch
			c.exclusive(n, d)
			c.epochBound(d)
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
			if end := n.local(r.sentAt).Add(time.Duration(float64(simEpochLease) * (1 - simDrift))); end.After(c.live[p]) {
				c.live[p] = end
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
		from := c.s.nodeByID(o.env.From.ID)
		ak := answerKey{p, from.idx}
		if b.ForInc != n.disk.Inc || c.answered[ak] {
			break
		}
		c.answered[ak] = true
		for _, h := range b.Held {
			d := c.find(h.Key, h.Token)
			if d == nil || d.holder.node != from.idx {
				continue
			}
			// A renewal this home process grants later lengthens it again.
			d.homeEnd, d.adoptedBy = c.homeEnd(n, h.Remaining), p
			if c.validAtHolder(d) {
				if end := c.s.nodes[d.holder.node].trueAt(d.holderEnd); end.After(d.homeEnd) {
					c.fail(invHolderFirst, "%s adopted %s %s until %v, but its holder may use it until %v",
						n.id, h.Key, h.Token, d.homeEnd.Sub(simBase), end.Sub(simBase))
					return nil
				}
			}
		}
	case msg.Acquire:
		c.acquireReceived(n, o, b)
	case msg.Withdraw:
		// The home drops the waiter only if it still waits for this request.
		if h, ok := c.heard[streakKey{p, b.Key, o.env.From.ID}]; ok && h.req == b.Req {
			c.endStreak(p, b.Key, o.env.From.ID)
		}
		// A delegation granted to the withdrawn request is over at its home
		// (the holder sent Withdraw while the request was outstanding, so it
		// may never accept that Grant): from here on the home view is that
		// it is not live, and a holder that accepts it anyway holds it past
		// its home's expiry (D5).
		for _, d := range c.delegs[b.Key] {
			if d.home == p && d.req == b.Req && !d.accepted && c.s.nodes[d.holder.node].id == o.env.From.ID && c.s.now.Before(d.homeEnd) {
				d.homeEnd = c.s.now
			}
		}
	}
	return nil
}

func (c *independent) recall(d *deleg) {
	if !d.recalled {
		d.recalled, d.beforeRecall = true, d.admits
	}
}

// accept judges a Grant at the end of the step that received it: unless the
// step gave it back, the holder holds it from now until the echoed attempt's
// send + lease shortened by the drift bound, on its own clock.
func (c *independent) accept(n *simNode, d *deleg) {
	if d.over || d.pendingSince.IsZero() {
		return
	}
	d.pendingSince = time.Time{}
	if d.holderEnd.IsZero() {
		c.fail(invHolderLease, "%s kept %s %s though it never sent the attempt the Grant echoes", n.id, d.key, d.token)
		return
	}
	d.accepted = true
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
func (c *independent) epochBound(d *deleg) {
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
	if end := c.s.nodes[d.holder.node].trueAt(d.holderEnd); end.After(first.Add(simEpochLease + simSkew)) {
		c.fail(invEpochBound, "%s holds %s %s, leased in epoch %d, until %v: more than EpochLease + Skew after a later epoch was first learned at %v",
			c.s.nodes[d.holder.node].id, d.key, d.token, d.under, end.Sub(simBase), first.Sub(simBase))
	}
}

// epochBoundAll applies epochBound to every delegation held when epoch num
// is first learned.
func (c *independent) epochBoundAll(num uint64) {
	for _, key := range slices.Sorted(maps.Keys(c.delegs)) {
		for _, d := range c.delegs[key] {
			if d.accepted && d.under < num {
				c.epochBound(d)
			}
		}
	}
}

// exclusive checks D1 and D5 whenever d becomes valid or is extended.
func (c *independent) exclusive(n *simNode, d *deleg) {
	if !c.validAtHolder(d) {
		return
	}
	end := n.trueAt(d.holderEnd)
	if end.After(d.homeEnd) {
		c.fail(invHolderFirst, "%s holds %s %s until %v, past its home's expiry %v",
			n.id, d.key, d.token, end.Sub(simBase), d.homeEnd.Sub(simBase))
		return
	}
	for _, o := range c.delegs[d.key] {
		if o != d && c.validAtHolder(o) {
			c.fail(invDelegExclusion, "%s holds %s %s from %v while %s holds %s until %v",
				n.id, d.key, d.token, c.s.now.Sub(simBase), c.s.nodes[o.holder.node].id, o.token,
				c.s.nodes[o.holder.node].trueAt(o.holderEnd).Sub(simBase))
			return
		}
	}
}

func (c *independent) learnedBy(n *simNode) (msg.Epoch, bool) {
	if l, ok := c.learned[n.idx]; ok && l.gen == n.gen {
		return l.epoch, true
	}
	if n.disk.Learned() != nil {
		return n.disk.Learned().Epoch, true
	}
	return msg.Epoch{}, false
}

func (c *independent) admitted(n *simNode, e delegation.Event) {
	if l, ok := c.learnedBy(n); ok {
		for _, m := range l.Members {
			if m.Version != n.member.Version {
				c.fail(invFailClosedEp, "%s (v%d) admitted %s in epoch %d, where %s runs v%d",
					n.id, n.member.Version, e.Key, l.Number, m.ID, m.Version)
				return
			}
		}
	}
	d := c.find(e.Key, e.Token.Delegation())
	switch {
	case d == nil || d.holder != c.proc(n) || !d.accepted:
		c.fail(invHolderLease, "%s admitted %s under %s, which it never accepted", n.id, e.Key, e.Token)
	case !c.validAtHolder(d):
		c.fail(invHolderLease, "%s admitted %s under %s after it ended", n.id, e.Key, e.Token)
	case e.Expires.After(d.holderEnd):
		c.fail(invHolderLease, "%s admitted %s under %s until %v, past the %v its leases allow",
			n.id, e.Key, e.Token, n.trueAt(e.Expires).Sub(simBase), n.trueAt(d.holderEnd).Sub(simBase))
	case d.earlyRecall:
		c.fail(invRecall, "%s admitted %s under %s, recalled before it arrived", n.id, e.Key, e.Token)
	case d.contended && d.admits >= 1:
		c.fail(invRecall, "%s admitted %s under the contended %s a second time", n.id, e.Key, e.Token)
	case d.recalled && (d.beforeRecall > 0 || d.admits > d.beforeRecall):
		c.fail(invRecall, "%s admitted %s under %s after its Recall", n.id, e.Key, e.Token)
	}
	d2 := d
	if d2 != nil {
		d2.admits++
	}
}

// acquireReceived follows a requester's wait at a home from the Acquires
// the home acted on.
func (c *independent) acquireReceived(n *simNode, o observed, a msg.Acquire) {
	k := streakKey{c.proc(n), a.Key, o.env.From.ID}
	if h, ok := c.heard[k]; !ok || !a.Req.Less(h.req) {
		c.heard[k] = heardAttempt{a.Req, a.Attempt}
	}
	now := n.local(o.at)
	st := c.streaks[k]
	if st == nil {
		c.streaks[k] = &streak{definite: o.at, latest: o.at, lastHeard: now}
		return
	}
	if now.Sub(st.lastHeard) >= home.StaleWaiters*simRetry-time.Millisecond {
		st.latest = o.at
	}
	st.lastHeard = now
}

func (c *independent) endStreak(home procKey, key string, from msg.NodeID) {
	delete(c.streaks, streakKey{home, key, from})
}

// fifo: a fresh grant goes to no requester that the home surely queued
// after another one it surely still keeps.
func (c *independent) fifo(n *simNode, g msg.Grant, to msg.NodeID) {
	p := c.proc(n)
	r := c.streaks[streakKey{p, g.Key, to}]
	c.endStreak(p, g.Key, to)
	if r == nil {
		return
	}
	now := n.local(c.s.now)
	var first *streak
	var firstFrom msg.NodeID
	for k, q := range c.streaks {
		if k.home != p || k.key != g.Key || k.from == to {
			continue
		}
		if now.Sub(q.lastHeard) >= home.StaleWaiters*simRetry-time.Millisecond || !q.latest.Before(r.definite) {
			continue
		}
		if first == nil || q.latest.Before(first.latest) || (q.latest.Equal(first.latest) && k.from < firstFrom) {
			first, firstFrom = q, k.from
		}
	}
	if first != nil {
		c.fail(invFIFOReceipt, "%s granted %s (%s) to %s, queued at %v, while %s, queued by %v, still waits",
			n.id, g.Key, g.Token, to, r.definite.Sub(simBase), firstFrom, first.latest.Sub(simBase))
	}
}
