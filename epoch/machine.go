package epoch

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// Config configures one node's epoch machine.
type Config struct {
	// Self is this node (ID, Store, Addr, Version).
	Self msg.Member
	// EpochLease is how long one renewal round grants liveness, measured from
	// the round's send time and shortened by MaxDrift.
	EpochLease time.Duration
	// MaxDrift bounds clock rate drift (0.01 = 1%).
	MaxDrift float64
	// RetryInterval is the base of proposer retries (jittered) and of resends
	// within a renewal round.
	RetryInterval time.Duration
	// PromiseTimeout: a member that sees a promise for n+1 and does not learn
	// n+1 within it completes the instance itself (H16).
	PromiseTimeout time.Duration
	// Rand seeds jitter; the caller owns the seed. When nil, New uses a
	// fixed-seed generator (deterministic, but every node then jitters alike,
	// which slows down duelling proposers: drivers should pass one).
	Rand *rand.Rand
	// Mutations switch safety rules off in tests built with the
	// homelock_mutations tag; in any other build it is empty.
	Mutations Mutations
}

// Output is what one step asks its driver to do, in order: sync Acceptor and
// Learned to the store, then send Msgs. Msgs is the machine's own buffer,
// valid until its next call that returns an Output: a driver that keeps the
// messages longer copies them (core appends them to its queue).
type Output struct {
	// Acceptor holds at most one record per instance (the latest); the store
	// keeps one record per instance and overwrites it.
	Acceptor []AcceptorRecord
	Learned  *Learned
	Msgs     []msg.Envelope
	// NewEpoch is set when this step learned a new epoch (Learned is set too).
	NewEpoch bool
}

// Empty reports whether the step asks for nothing.
func (o Output) Empty() bool {
	return len(o.Acceptor) == 0 && o.Learned == nil && len(o.Msgs) == 0
}

// DueNow is what NextDeadline returns when Tick has work at once (after New,
// ClockJump, or a restored promise that needs its timer armed). It lies before
// any real now, so a driver that sleeps until the deadline ticks immediately.
var DueNow = time.Unix(0, 0).UTC()

// Machine is one node's epoch state machine: acceptor, proposer, learner and
// liveness renewer. It does no I/O, starts no goroutine and reads no clock.
// It is not safe for concurrent use: the driver serialises every call, which
// is what lets a renewal round count the node's own answer "in the same step
// as Prepare and Accept" (H15).
type Machine struct {
	cfg Config
	rng *rand.Rand

	// learned is the durable learned epoch (nil: none). Invariant: every
	// value it has held was returned in some Output.Learned (or came from
	// State), so nothing is ever acted on that a crash could forget (H10).
	learned   *Learned
	learnedAt time.Time
	// digestOf is the learned value digest was computed for (a cache).
	digestOf *Learned
	digest   uint64

	// acc holds the acceptor records for instances above learned.Number
	// (only learned.Number+1 can exist). Invariant: each was returned in
	// Output.Acceptor in the step that changed it (the forgetful acceptor, docs/design.md).
	acc map[uint64]AcceptorRecord

	prop       *proposal
	maxCounter uint64 // highest ballot counter seen, so new ballots outbid it
	desired    []change

	// completeAt is when this member completes instance n+1 itself: a stray
	// promise (H16) or a bootstrap member waiting for the lowest ID's epoch 1.
	completeAt time.Time
	// proposeAt is when to propose the wanted changes that the epoch just
	// learned left out (set by learn, run by Tick).
	proposeAt time.Time
	// armStray: a restored promise for n+1 needs completeAt armed at the
	// first Tick (New has no now).
	armStray bool

	live liveness

	lastQuery map[msg.NodeID]time.Time

	// Per-step scratch: the Output being built and the messages addressed to
	// this node itself, which are handled within the same step. msgs backs
	// Output.Msgs step after step: a renewal answer, one message, was a
	// fresh slice the size of the epoch in every step.
	out   Output
	selfQ []msg.Envelope
	msgs  []msg.Envelope
	kept  outbuf.Kept
}

// New returns a machine restored from its durable state. A restored epoch is
// reported by Current with the zero learnedAt: the driver treats it as
// learned at start (its activation gates start then). Liveness is never
// restored (it starts at zero and a renewal round is due at the first Tick).
func New(cfg Config, st State) *Machine {
	m := &Machine{
		cfg:       cfg,
		rng:       cfg.Rand,
		acc:       make(map[uint64]AcceptorRecord),
		lastQuery: make(map[msg.NodeID]time.Time),
	}
	if m.rng == nil {
		m.rng = rand.New(rand.NewPCG(0x686f6d656c6f636b, 1))
	}
	if st.Learned != nil {
		l := cloneLearned(*st.Learned)
		m.learned = &l
	}
	for _, r := range st.Acceptor {
		if m.learned != nil && r.Instance <= m.learned.Epoch.Number {
			continue // decided: an acceptor that learned it answers Learn
		}
		// Records only grow; if the store handed us several for one
		// instance, the highest promise is the latest.
		if old, ok := m.acc[r.Instance]; ok && r.Promised.Compare(old.Promised) < 0 {
			continue
		}
		m.acc[r.Instance] = cloneRecord(r)
		m.maxCounter = max(m.maxCounter, r.Promised.Counter)
	}
	if m.learned != nil {
		m.live.kick = true
		if r, ok := m.acc[m.learned.Epoch.Number+1]; ok && !r.Promised.IsZero() {
			m.armStray = true // H16: a promise a crash did not forget
		}
	}
	return m
}

// Bootstrap installs initial as epoch 0 and starts agreement on epoch 1: the
// member with the lowest node ID proposes at once, the others after
// PromiseTimeout unless they learned epoch 1 by then. A machine that has
// already learned an epoch ignores Bootstrap (epoch numbers only grow), and
// returns an empty Output.
func (m *Machine) Bootstrap(now time.Time, initial []msg.Member) Output {
	m.begin()
	if m.learned != nil {
		return m.finish(now)
	}
	e := msg.Epoch{Number: 0, Members: slices.Clone(initial), Caps: msg.Caps{Ring: msg.RingV1}}
	msg.SortMembers(e.Members)
	m.learn(now, Learned{Epoch: e}, false)
	if m.isMember(e, m.cfg.Self) {
		if e.Members[0].ID == m.cfg.Self.ID {
			m.startProposal(now)
		} else {
			m.completeAt = now.Add(m.cfg.PromiseTimeout)
		}
	}
	return m.finish(now)
}

// Step handles one epoch message (Prepare, Promise, Accept, Accepted, Learn,
// EpochQuery, Renewal, RenewalAnswer, Join, Leave). Other bodies are ignored.
func (m *Machine) Step(now time.Time, env msg.Envelope) Output {
	m.begin()
	m.handle(now, env)
	return m.finish(now)
}

// Tick runs everything due at now: proposer retries, renewal rounds and
// resends, the stray-promise timeout.
func (m *Machine) Tick(now time.Time) Output {
	m.begin()
	if m.armStray {
		m.armStray = false
		m.noteStray(now)
	}
	if p := m.prop; p != nil && !p.retryAt.IsZero() && !now.Before(p.retryAt) {
		m.newBallot(now)
	}
	if !m.completeAt.IsZero() && !now.Before(m.completeAt) {
		m.completeAt = time.Time{}
		if !testNoStrayTimeout {
			m.startProposal(now) // H16: any member completes the instance
		}
	}
	if !m.proposeAt.IsZero() && !now.Before(m.proposeAt) {
		m.proposeAt = time.Time{}
		if m.pendingChange() || (m.learned != nil && m.learned.Epoch.Number == 0) {
			m.startProposal(now) // wanted changes, or bootstrap's epoch 1
		}
	}
	m.tickLiveness(now)
	return m.finish(now)
}

// NextDeadline is when Tick next has work; zero when none. DueNow means at
// once.
func (m *Machine) NextDeadline() time.Time {
	if m.armStray || m.live.kick {
		return DueNow
	}
	var d time.Time
	early := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	if m.prop != nil {
		early(m.prop.retryAt)
	}
	early(m.completeAt)
	early(m.proposeAt)
	early(m.live.nextRound)
	if m.live.r != nil {
		early(m.live.r.resendAt)
	}
	return d
}

// ProposeRemove asks for an epoch without member (failure detection agreed it
// down). The wish is remembered until an epoch without member (ID and store)
// is learned; a non-member records it but proposes nothing.
func (m *Machine) ProposeRemove(now time.Time, member msg.Member) Output {
	m.begin()
	m.desire(now, change{remove: true, member: member})
	return m.finish(now)
}

// WithdrawRemove forgets a wish to remove member (failure detection saw it
// come back) and reports whether there was one. A proposal already under
// way keeps its value: Paxos may have chosen it.
func (m *Machine) WithdrawRemove(member msg.Member) bool {
	i := slices.IndexFunc(m.desired, func(c change) bool { return c.remove && c.member.Same(member) })
	if i < 0 {
		return false
	}
	m.desired = slices.Delete(m.desired, i, i+1)
	return true
}

// Current returns the learned epoch, its certificate, and when it was learned
// (the now of the step that learned it; the zero time for an epoch restored
// by New). ok is false when no epoch is learned. The returned value shares
// memory with the machine: callers must not modify it.
func (m *Machine) Current() (Learned, time.Time, bool) {
	if m.learned == nil {
		return Learned{}, time.Time{}, false
	}
	return *m.learned, m.learnedAt, true
}

// LiveUntil is the end of this node's epoch liveness for the current epoch
// (the zero time when it holds none). A home may grant under the current
// epoch only while now < LiveUntil (E2).
func (m *Machine) LiveUntil() time.Time { return m.live.until }

// ClockJump drops liveness at once; the next Tick starts a fresh round.
func (m *Machine) ClockJump() {
	m.live.until = time.Time{}
	m.live.r = nil
	m.live.prev = nil
	if m.learned != nil {
		m.live.kick = true
	}
}

// --- step plumbing ---

func (m *Machine) begin() {
	m.out = Output{}
	m.selfQ = m.selfQ[:0]
}

// finish handles the messages this node sent to itself (its own acceptor
// answering its own proposer) and returns the step's Output with at most one
// acceptor record per instance.
func (m *Machine) finish(now time.Time) Output {
	for i := 0; i < len(m.selfQ); i++ {
		m.handle(now, m.selfQ[i])
	}
	m.selfQ = m.selfQ[:0]
	out := m.out
	if len(out.Acceptor) > 1 {
		var recs []AcceptorRecord
		for i, r := range out.Acceptor {
			later := slices.ContainsFunc(out.Acceptor[i+1:], func(o AcceptorRecord) bool { return o.Instance == r.Instance })
			if !later {
				recs = append(recs, r)
			}
		}
		out.Acceptor = recs
	}
	m.out = Output{}
	if out.Msgs != nil {
		m.msgs = outbuf.Keep(&m.kept, out.Msgs)
	}
	return out
}

func (m *Machine) handle(now time.Time, env msg.Envelope) {
	if _, isLearn := env.Body.(msg.Learn); !isLearn {
		m.catchUp(now, env)
	}
	switch b := env.Body.(type) {
	case msg.Prepare:
		m.onPrepare(now, env, b)
	case msg.Promise:
		m.onPromise(now, env, b)
	case msg.Accept:
		m.onAccept(now, env, b)
	case msg.Accepted:
		m.onAccepted(now, env, b)
	case msg.Learn:
		m.onLearn(now, b)
	case msg.EpochQuery:
		m.sendLearn(env.From.ID)
	case msg.Renewal:
		m.onRenewal(now, env, b)
	case msg.RenewalAnswer:
		m.onRenewalAnswer(now, env, b)
	case msg.Join:
		if m.staleJoin(env.Epoch, b.Member) {
			m.sendLearn(env.From.ID) // a joiner that means it asks again, caught up
			return
		}
		m.desire(now, change{member: b.Member})
		m.answerJoiner(env.From.ID, b.Member)
	case msg.Leave:
		if m.staleLeave(env.Epoch, b.Member) {
			m.sendLearn(env.From.ID) // a leaver that means it asks again, caught up
			return
		}
		m.desire(now, change{remove: true, member: b.Member})
	}
}

// AnswersJoin reports whether this node answers a Join that who sent in
// epoch sentIn with the learned epoch, and nothing else: who is in it as it
// is (it only has to learn it), or its Join is stale (it has to learn it
// before it may ask again). A sender that keeps asking so is not receiving
// what this node sends it.
func (m *Machine) AnswersJoin(sentIn uint64, who msg.Member) bool {
	if m.learned == nil || m.learned.Epoch.Number < 1 {
		return false
	}
	return reflected(m.learned.Epoch, change{member: who}) || m.staleJoin(sentIn, who)
}

// staleJoin reports whether a Join its sender sent in epoch sentIn predates
// that member's last membership: the member was in the epoch before the
// learned one and is not in the learned one, so it joined after sentIn and
// left (or was removed) since. A joiner asks only once it has learned an
// epoch without itself, so a Join it means now names the learned epoch; a
// Join held up in the network must not add back a node that left.
func (m *Machine) staleJoin(sentIn uint64, who msg.Member) bool {
	if m.learned == nil || sentIn >= m.learned.Epoch.Number || m.cfg.Mutations.acceptStaleJoin() {
		return false
	}
	prev := m.learned.Cert.Prev // epoch learned-1 (verifyCert)
	return isMember(prev, who) && !isMember(m.learned.Epoch, who)
}

// staleLeave reports whether a Leave its sender sent in epoch sentIn may
// predate the member's joining again: a Leave held up in the network must
// not remove a member that rejoined since (seed 527,009). The member was in
// every epoch from sentIn on when sentIn is the learned epoch or the one
// before, which the certificate names; further back this node cannot tell,
// and drops it: a leaver retries until it learns an epoch without itself.
func (m *Machine) staleLeave(sentIn uint64, who msg.Member) bool {
	if m.learned == nil || sentIn >= m.learned.Epoch.Number || m.cfg.Mutations.acceptStaleLeave() {
		return false
	}
	prev := m.learned.Cert.Prev
	return sentIn != prev.Number || !isMember(prev, who)
}

// catchUp asks a sender whose header names a newer epoch for it, at most
// once per RetryInterval per sender.
func (m *Machine) catchUp(now time.Time, env msg.Envelope) {
	if env.Epoch == 0 || (m.learned != nil && env.Epoch <= m.learned.Epoch.Number) || env.From.ID == m.cfg.Self.ID {
		return
	}
	if last, ok := m.lastQuery[env.From.ID]; ok && now.Before(last.Add(m.cfg.RetryInterval)) {
		return
	}
	m.lastQuery[env.From.ID] = now
	m.send(env.From.ID, msg.EpochQuery{})
}

// send addresses body to node to with this node's header. Messages to itself
// are handled later in the same step.
func (m *Machine) send(to msg.NodeID, body msg.Body) {
	env := m.envelopeTo(to, body)
	if to == m.cfg.Self.ID {
		m.selfQ = append(m.selfQ, env)
		return
	}
	if m.out.Msgs == nil {
		m.out.Msgs = m.msgs[:0]
	}
	m.out.Msgs = append(m.out.Msgs, env)
}

// sendLearn sends our learned epoch to a node that is behind. Epoch 0 has no
// certificate and is never taught: each node bootstraps it explicitly.
func (m *Machine) sendLearn(to msg.NodeID) {
	if m.learned == nil || m.learned.Epoch.Number == 0 || to == m.cfg.Self.ID {
		return
	}
	m.send(to, msg.Learn{Epoch: m.learned.Epoch, Cert: m.learned.Cert})
}

// isMember is membership by (node ID, store ID): a wiped disk under a reused
// node ID is not a member for any role (H17).
func (m *Machine) isMember(e msg.Epoch, who msg.Member) bool {
	return isMember(e, who)
}

func isMember(e msg.Epoch, who msg.Member) bool {
	if testIgnoreStore {
		_, ok := e.Member(who.ID)
		return ok
	}
	return e.Has(who)
}

// selfMember reports whether this node is a member of its learned epoch.
func (m *Machine) selfMember() bool {
	return m.learned != nil && m.isMember(m.learned.Epoch, m.cfg.Self)
}

func cloneLearned(l Learned) Learned {
	l.Epoch = l.Epoch.Clone()
	l.Cert.Acceptors = slices.Clone(l.Cert.Acceptors)
	l.Cert.Prev = l.Cert.Prev.Clone()
	return l
}

func cloneRecord(r AcceptorRecord) AcceptorRecord {
	if r.Value != nil {
		v := r.Value.Clone()
		r.Value = &v
	}
	return r
}

// learnedDigest is the learned epoch's digest, computed once per epoch: every
// renewal and every header compares it.
func (m *Machine) learnedDigest() uint64 {
	if m.digestOf != m.learned {
		m.digestOf, m.digest = m.learned, m.learned.Epoch.Digest()
	}
	return m.digest
}

// envelopeTo builds an envelope from this node with its current header; the
// simulator and tests use it for messages a driver sends itself (Join, Leave).
func (m *Machine) envelopeTo(to msg.NodeID, body msg.Body) msg.Envelope {
	env := msg.Envelope{From: m.cfg.Self, To: to, Version: m.cfg.Self.Version, Body: body}
	if m.learned != nil {
		env.Epoch = m.learned.Epoch.Number
		env.Digest = m.learnedDigest()
	}
	return env
}
