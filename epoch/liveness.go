package epoch

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
)

// Epoch liveness (docs/design.md, "Epoch liveness", invariant E2: every liveness for
// epoch n ends within EpochLease of the moment anyone learns n+1).
//
// Why it is safe: a round grants liveness only with ok answers from a
// majority of epoch n for that ONE round (H7). An acceptor answers ok only
// while it has not promised n+1, and its promises are durable. Any majority
// that promised n+1 (needed to choose it) shares a member with the round's
// majority; that member answered before it promised, so the round was sent
// before n+1 could be learned, and liveness measured from the round's send
// time, shortened by the drift bound, ends before learnedAt(n+1)+EpochLease
// on every clock. The node counts its own answer the same way, in the same
// serialized step (H15). Non-members neither run rounds nor get ok (H14).

type liveness struct {
	until     time.Time
	nextRound time.Time
	// kick: a round is due at the next Tick (after New or ClockJump).
	kick bool
	r    *round
	// prev are the rounds r replaced, newest last, still counted: each
	// separately (H7), so answers that take longer than EpochLease/3 to
	// come back (a loaded home) still grant liveness from their own round.
	prev  []*round
	oldOK []msg.NodeID // only under testMixRounds
}

// openRounds bounds the rounds counted at once (r and prev).
const openRounds = 4

// round is one renewal round. Resends keep the nonce and the original sentAt.
type round struct {
	nonce    uint64
	epoch    uint64
	sentAt   time.Time
	resendAt time.Time // zero once granted
	ok       []msg.NodeID
	answered []msg.NodeID
}

func (l *liveness) reset() {
	l.until = time.Time{}
	l.r = nil
	l.prev = nil
	l.oldOK = nil
	l.nextRound = time.Time{}
	l.kick = false
}

// liveEnd is when liveness from a round sent at sentAt ends: EpochLease
// measured on our clock, shortened by the drift bound so that it ends no
// later than EpochLease of true time after sentAt.
func liveEnd(sentAt time.Time, lease time.Duration, maxDrift float64) time.Time {
	return sentAt.Add(time.Duration(float64(lease) * (1 - maxDrift)))
}

// renewalResult is the acceptor's answer to a renewal round for epoch
// (number, digest) from sender. It reads durable state only.
func (m *Machine) renewalResult(sender msg.Member, number, digest uint64) (msg.RenewalResult, uint64) {
	if m.learned == nil {
		return msg.RenewalUnknownEpoch, 0
	}
	n := m.learned.Epoch.Number
	switch {
	case n > number:
		return msg.RenewalNewerEpoch, 0
	case n < number || digest != m.learnedDigest():
		return msg.RenewalUnknownEpoch, 0
	case !m.isMember(m.learned.Epoch, sender) && !testRenewNonMember:
		return msg.RenewalNotMember, 0 // H14
	case !m.selfMember():
		return msg.RenewalNotMember, 0 // H17: no trusted acceptor record
	}
	if hi := m.promisedAbove(n); hi != 0 {
		return msg.RenewalPromisedHigher, hi
	}
	return msg.RenewalOK, 0
}

func (m *Machine) onRenewal(now time.Time, env msg.Envelope, rn msg.Renewal) {
	res, promised := m.renewalResult(env.From, env.Epoch, env.Digest)
	m.send(env.From.ID, msg.RenewalAnswer{Nonce: rn.Nonce, Result: res, Promised: promised})
	if res == msg.RenewalNewerEpoch {
		m.sendLearn(env.From.ID)
	}
}

// startRound starts a renewal round for the learned epoch, counting our own
// answer from our acceptor state at this instant (H15).
func (m *Machine) startRound(now time.Time) {
	l := &m.live
	l.kick = false
	if testMixRounds && l.r != nil {
		l.oldOK = append(l.oldOK, l.r.ok...)
	}
	if l.r != nil {
		l.prev = append(l.prev, l.r)
		if len(l.prev) > openRounds-1 {
			l.prev = append(l.prev[:0], l.prev[len(l.prev)-(openRounds-1):]...)
		}
	}
	l.r = nil
	if !m.selfMember() {
		l.nextRound = time.Time{} // H14: non-members hold no liveness
		return
	}
	e := &m.learned.Epoch
	r := &round{nonce: m.rng.Uint64() | 1, epoch: e.Number, sentAt: now, resendAt: now.Add(m.cfg.RetryInterval)}
	l.r = r
	l.nextRound = now.Add(m.cfg.EpochLease / 3)
	self := m.cfg.Self
	r.answered = append(r.answered, self.ID)
	// learnedDigest, not e.Digest(): a round every third of EpochLease
	// re-encoded and hashed the whole epoch.
	if res, _ := m.renewalResult(self, e.Number, m.learnedDigest()); res == msg.RenewalOK || testCountSelfAfterPromise {
		r.ok = append(r.ok, self.ID)
	} else if res == msg.RenewalPromisedHigher {
		m.noteStray(now)
	}
	for _, mb := range e.Members {
		if mb.ID != self.ID {
			m.send(mb.ID, msg.Renewal{Nonce: r.nonce})
		}
	}
	m.maybeGrant(now, r)
}

func (m *Machine) tickLiveness(now time.Time) {
	l := &m.live
	if m.learned == nil {
		l.kick = false
		return
	}
	if l.kick || (!l.nextRound.IsZero() && !now.Before(l.nextRound)) {
		m.startRound(now)
		return
	}
	r := l.r
	if r == nil || r.resendAt.IsZero() || now.Before(r.resendAt) {
		return
	}
	r.resendAt = now.Add(m.cfg.RetryInterval)
	for _, mb := range m.learned.Epoch.Members {
		if !slices.Contains(r.answered, mb.ID) {
			m.send(mb.ID, msg.Renewal{Nonce: r.nonce})
		}
	}
}

func (m *Machine) onRenewalAnswer(now time.Time, env msg.Envelope, a msg.RenewalAnswer) {
	// H7: an answer counts only for the round it names.
	r := m.live.round(a.Nonce)
	if r == nil || m.learned.Epoch.Number != r.epoch {
		return
	}
	if !m.isMember(m.learned.Epoch, env.From) || slices.Contains(r.answered, env.From.ID) {
		return
	}
	switch a.Result {
	case msg.RenewalOK:
		if env.Epoch != r.epoch || env.Digest != m.learnedDigest() {
			return
		}
		r.answered = append(r.answered, env.From.ID)
		r.ok = append(r.ok, env.From.ID)
		m.maybeGrant(now, r)
	case msg.RenewalPromisedHigher:
		r.answered = append(r.answered, env.From.ID)
		if a.Promised == r.epoch+1 {
			m.noteStray(now) // H16
		}
	case msg.RenewalUnknownEpoch:
		// Not marked answered: once our Learn arrives, the resend gets ok.
		m.sendLearn(env.From.ID)
	default:
		r.answered = append(r.answered, env.From.ID)
	}
}

// maybeGrant extends liveness once a majority answered ok to this round.
// round returns the open round with this nonce.
func (l *liveness) round(nonce uint64) *round {
	if l.r != nil && l.r.nonce == nonce {
		return l.r
	}
	for _, r := range l.prev {
		if r.nonce == nonce {
			return r
		}
	}
	return nil
}

func (m *Machine) maybeGrant(now time.Time, r *round) {
	n := len(r.ok)
	if testMixRounds {
		all := slices.Clone(m.live.oldOK)
		for _, id := range r.ok {
			if !slices.Contains(all, id) {
				all = append(all, id)
			}
		}
		n = len(all)
	}
	if n < m.learned.Epoch.Majority() {
		return
	}
	sentAt, drift := r.sentAt, m.cfg.MaxDrift
	if m.cfg.Mutations.livenessAtAnswer() {
		sentAt = now
	}
	if m.cfg.Mutations.livenessNoDrift() {
		drift = 0
	}
	if end := liveEnd(sentAt, m.cfg.EpochLease, drift); end.After(m.live.until) {
		m.live.until = end
	}
	r.resendAt = time.Time{}
}

// noteStray arms the H16 timer: a promise for n+1 was seen and, unless n+1
// is learned within PromiseTimeout, this member completes the instance.
func (m *Machine) noteStray(now time.Time) {
	if m.learned == nil || !m.completeAt.IsZero() || !m.selfMember() {
		return
	}
	if m.prop != nil && m.prop.instance == m.learned.Epoch.Number+1 {
		return // we are the proposer: our retries complete it
	}
	m.completeAt = now.Add(m.cfg.PromiseTimeout)
}
