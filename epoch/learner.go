package epoch

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
)

// The learner: an epoch is learned only with a certificate (Accepted replies
// for one ballot from distinct members forming a majority of the previous
// epoch), only when strictly newer than the one we hold (numbers only grow),
// and it is returned in Output.Learned so the driver syncs it before any
// message that depends on it leaves (H10).

func (m *Machine) onLearn(now time.Time, l msg.Learn) {
	if m.learned != nil && l.Epoch.Number <= m.learned.Epoch.Number {
		return
	}
	var known *msg.Epoch
	if m.learned != nil && m.learned.Epoch.Number+1 == l.Epoch.Number {
		known = &m.learned.Epoch
	}
	if verifyCert(l.Epoch, l.Cert, known) != nil {
		return
	}
	m.learn(now, cloneLearned(Learned{Epoch: l.Epoch, Cert: l.Cert}), false)
}

// verifyCert checks that c proves e was chosen. known is the previous epoch
// when the learner holds it; a learner further behind checks against c.Prev,
// which it cannot compare with anything (it trusts the chain's shape).
func verifyCert(e msg.Epoch, c msg.Certificate, known *msg.Epoch) error {
	if e.Number == 0 || c.Prev.Number+1 != e.Number {
		return errCertNumber
	}
	if known != nil && (known.Number != c.Prev.Number || known.Digest() != c.Prev.Digest()) {
		return errCertPrev
	}
	if c.Ballot.IsZero() {
		return errCertBallot
	}
	if err := validValue(e, c.Prev); err != nil {
		return err
	}
	for i, a := range c.Acceptors {
		if !isMember(c.Prev, a) {
			return errCertAcceptor
		}
		if slices.ContainsFunc(c.Acceptors[:i], func(o msg.Member) bool { return o.ID == a.ID }) {
			return errCertDup
		}
	}
	if len(c.Acceptors) < c.Prev.Majority() {
		return errCertMajority
	}
	return nil
}

// learn installs l (already verified) as the learned epoch. broadcast is set
// by the proposer that assembled the certificate: it tells the members of
// both the old and the new epoch.
func (m *Machine) learn(now time.Time, l Learned, broadcast bool) {
	old := m.learned
	m.learned = &l
	m.learnedAt = now
	out := cloneLearned(l)
	m.out.Learned = &out
	m.out.NewEpoch = true

	n := l.Epoch.Number
	for i := range m.acc {
		if i <= n {
			delete(m.acc, i)
		}
	}
	if m.prop != nil && m.prop.instance <= n {
		m.prop = nil
	}
	m.completeAt, m.armStray, m.proposeAt = time.Time{}, false, time.Time{}

	if broadcast {
		var sent []msg.NodeID
		tell := func(ms []msg.Member) {
			for _, mb := range ms {
				if mb.ID != m.cfg.Self.ID && !slices.Contains(sent, mb.ID) {
					sent = append(sent, mb.ID)
					m.sendLearn(mb.ID)
				}
			}
		}
		if old != nil {
			tell(old.Epoch.Members)
		}
		tell(l.Epoch.Members)
	}

	// E2: liveness for the old epoch is gone; a round for the new one
	// starts at once.
	m.live.reset()
	m.startRound(now)

	// Changes a competing proposal left out are proposed for the next
	// instance from the next Tick, never in this step: a step learns at most
	// one epoch (a one-member epoch would otherwise choose n+2 at once and
	// Output.Learned would skip n+1).
	m.pruneDesired()
	if n >= 1 && m.pendingChange() {
		m.proposeAt = now
	}
}
