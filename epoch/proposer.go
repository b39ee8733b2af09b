package epoch

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
)

// The proposer of instance n+1, run by a member of epoch n when it has a
// membership change to make (Join, Leave, ProposeRemove), at bootstrap, or to
// complete a stray promise (H16). Classic single-decree Paxos: Prepare with a
// ballot above any seen, adopt the highest accepted value reported by a
// majority of promises (else our own), Accept, and a certificate of Accepted
// replies for that one ballot (never mixed) from a majority of epoch n.
//
// Duelling proposers converge because a refused or timed-out ballot waits a
// randomised, growing backoff before the next one.

type proposal struct {
	instance uint64
	ballot   msg.Ballot
	phase    int // 0 waiting for retryAt, 1 preparing, 2 accepting
	attempt  int
	retryAt  time.Time

	promised  []msg.NodeID
	bestBal   msg.Ballot
	bestValue *msg.Epoch
	value     msg.Epoch
	accepted  []msg.Member
}

// change is a membership change this node wants; at most one per node ID.
type change struct {
	remove bool
	member msg.Member
}

// desire records a wanted change and proposes it if this node is a member.
// A later wish for the same node ID supersedes an earlier one, except that a
// removal of an old store does not undo a pending Join that replaces it
// (H21: the join already removes the old entry).
func (m *Machine) desire(now time.Time, c change) {
	i := slices.IndexFunc(m.desired, func(o change) bool { return o.member.ID == c.member.ID })
	switch {
	case i < 0:
		m.desired = append(m.desired, c)
	case c.remove && !m.desired[i].remove && m.desired[i].member.Store != c.member.Store:
		// keep the replacing join
	default:
		m.desired[i] = c
	}
	m.pruneDesired()
	if m.learned != nil && m.learned.Epoch.Number >= 1 && m.pendingChange() {
		m.startProposal(now)
	}
}

// reflected reports whether e already shows c: a join when e holds exactly
// that member entry (same store, address and version), a removal when e no
// longer holds that (ID, store).
func reflected(e msg.Epoch, c change) bool {
	if c.remove {
		return !isMember(e, c.member)
	}
	got, ok := e.Member(c.member.ID)
	if testJoinByIDOnly {
		return ok
	}
	return ok && got == c.member
}

// pruneDesired drops the changes the learned epoch already shows: a change
// that no longer applies is done.
func (m *Machine) pruneDesired() {
	if m.learned == nil {
		return
	}
	e := m.learned.Epoch
	m.desired = slices.DeleteFunc(m.desired, func(c change) bool {
		// The last member is never removed (ownValue): that wish is void.
		last := c.remove && len(e.Members) == 1 && isMember(e, c.member)
		return last || reflected(e, c)
	})
}

func (m *Machine) pendingChange() bool { return len(m.desired) > 0 }

// answerJoiner tells a joiner that is already a member which epoch it is in
// (it may have missed the Learn).
func (m *Machine) answerJoiner(from msg.NodeID, j msg.Member) {
	if m.learned != nil && m.learned.Epoch.Number >= 1 && reflected(m.learned.Epoch, change{member: j}) {
		m.sendLearn(from)
	}
}

// ownValue is what this node proposes when no acceptor reports an accepted
// value: epoch n with the desired changes applied. Instance 1 is always the
// initial members unchanged (changes wait for instance 2).
func (m *Machine) ownValue() msg.Epoch {
	cur := m.learned.Epoch
	v := cur.Clone()
	v.Number = cur.Number + 1
	if cur.Number == 0 {
		return v
	}
	for _, c := range m.desired {
		// A join replaces the entry with the same node ID (H21); a removal
		// removes only that (ID, store), and never the last member: an
		// epoch without members could agree nothing ever again, not even a
		// join (leaves and removals of every member can be wanted at once).
		kept := slices.DeleteFunc(slices.Clone(v.Members), func(o msg.Member) bool {
			if c.remove {
				return o.ID == c.member.ID && (o.Store == c.member.Store || testIgnoreStore)
			}
			return o.ID == c.member.ID
		})
		if c.remove && len(kept) == 0 {
			continue
		}
		v.Members = kept
		if !c.remove {
			v.Members = append(v.Members, c.member)
		}
	}
	msg.SortMembers(v.Members)
	return v
}

// startProposal proposes instance n+1 unless already doing so. Only a member
// of epoch n proposes.
func (m *Machine) startProposal(now time.Time) {
	if !m.selfMember() {
		return
	}
	inst := m.learned.Epoch.Number + 1
	if m.prop != nil && m.prop.instance == inst {
		return
	}
	if m.out.NewEpoch {
		// A step learns at most one epoch (Output.Learned holds one): in a
		// one-member epoch our own acceptor would choose n+1 right here.
		m.proposeAt = now
		return
	}
	m.prop = &proposal{instance: inst}
	m.completeAt = time.Time{} // we are completing it now
	m.newBallot(now)
}

// newBallot starts phase 1 with a ballot above every one seen.
func (m *Machine) newBallot(now time.Time) {
	p := m.prop
	if r, ok := m.acc[p.instance]; ok {
		m.maxCounter = max(m.maxCounter, r.Promised.Counter)
	}
	m.maxCounter++
	keep := p.accepted
	*p = proposal{instance: p.instance, attempt: p.attempt + 1, phase: 1,
		ballot: msg.Ballot{Counter: m.maxCounter, Node: m.cfg.Self.ID}}
	if testMixBallots {
		p.accepted = keep
	}
	p.retryAt = now.Add(m.backoff(p.attempt))
	for _, mb := range m.learned.Epoch.Members {
		m.send(mb.ID, msg.Prepare{Instance: p.instance, Ballot: p.ballot})
	}
}

// backoff is the jittered, growing wait before a ballot is given up: uniform
// in [1, 3) x RetryInterval x 2^min(attempt-1, 3).
func (m *Machine) backoff(attempt int) time.Duration {
	base := m.cfg.RetryInterval << min(max(attempt-1, 0), 3)
	if base <= 0 {
		base = time.Millisecond
	}
	return base + time.Duration(m.rng.Int64N(2*int64(base)))
}

// giveUp abandons the current ballot after a refusal; the next one starts
// after a randomised backoff so that duelling proposers converge.
func (m *Machine) giveUp(now time.Time, promised msg.Ballot) {
	p := m.prop
	m.maxCounter = max(m.maxCounter, promised.Counter)
	if p.phase == 0 {
		return
	}
	p.phase = 0
	p.retryAt = now.Add(m.backoff(p.attempt))
}

func (m *Machine) onPromise(now time.Time, env msg.Envelope, pr msg.Promise) {
	p := m.prop
	if p == nil || p.instance != pr.Instance || p.ballot != pr.Ballot || p.phase != 1 {
		m.maxCounter = max(m.maxCounter, pr.Promised.Counter)
		return
	}
	if !m.isMember(m.learned.Epoch, env.From) {
		return
	}
	if !pr.OK {
		if pr.Promised.Compare(p.ballot) > 0 {
			m.giveUp(now, pr.Promised)
		}
		return
	}
	if slices.Contains(p.promised, env.From.ID) {
		return // duplicate
	}
	p.promised = append(p.promised, env.From.ID)
	if pr.Value != nil && pr.Accepted.Compare(p.bestBal) > 0 && !(m.cfg.Mutations.adoptFirstValue() && p.bestValue != nil) {
		p.bestBal = pr.Accepted
		v := pr.Value.Clone()
		p.bestValue = &v
	}
	if len(p.promised) < m.learned.Epoch.Majority() {
		return
	}
	p.phase = 2
	if p.bestValue != nil {
		p.value = *p.bestValue // adopt: it may have been chosen
	} else {
		p.value = m.ownValue()
	}
	for _, mb := range m.learned.Epoch.Members {
		m.send(mb.ID, msg.Accept{Instance: p.instance, Ballot: p.ballot, Value: p.value})
	}
}

func (m *Machine) onAccepted(now time.Time, env msg.Envelope, a msg.Accepted) {
	p := m.prop
	if p == nil || p.instance != a.Instance {
		m.maxCounter = max(m.maxCounter, a.Promised.Counter)
		return
	}
	if !m.isMember(m.learned.Epoch, env.From) {
		return
	}
	if !a.OK {
		if a.Ballot == p.ballot && a.Promised.Compare(p.ballot) > 0 {
			m.giveUp(now, a.Promised)
		}
		return
	}
	// A certificate is Accepted replies for ONE ballot (H7's rule for
	// agreement): replies to an earlier ballot of ours do not count.
	if (a.Ballot != p.ballot || p.phase != 2) && !testMixBallots {
		return
	}
	if p.phase != 2 {
		return
	}
	if slices.ContainsFunc(p.accepted, func(o msg.Member) bool { return o.ID == env.From.ID }) && !m.cfg.Mutations.countDuplicateAccepts() {
		return
	}
	mb, _ := m.learned.Epoch.Member(env.From.ID)
	p.accepted = append(p.accepted, mb)
	if len(p.accepted) < m.learned.Epoch.Majority() {
		return
	}
	acc := slices.Clone(p.accepted)
	msg.SortMembers(acc)
	l := Learned{
		Epoch: p.value.Clone(),
		Cert:  msg.Certificate{Ballot: p.ballot, Acceptors: acc, Prev: m.learned.Epoch.Clone()},
	}
	m.learn(now, l, true)
}
