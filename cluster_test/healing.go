package clustertest

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/msg"
)

// The healing checks: after the last fault, membership must come back by
// itself, run by the production decisions (core members.go):
//   - M1 healing: within healBound of the heal, every node is a member of
//     one agreed epoch, can lock (member as it runs, versions agree) and
//     holds epoch liveness;
//   - M2 bounded epochs: the epochs learned over the run are at most one
//     (the bootstrap) plus the sum of each fault's budget (budget), which is
//     2 for a fault that can make one node look down (its removal and its
//     join), 1 for a new node, 4 for a forced duel of two removals.
//
// Mutation runs skip them (but where SimConfig.HealingUnderMutation says):
// they switch safety rules off, and a check of liveness would catch every
// mutation for the wrong reason.
const (
	invHealing       = "M1 membership heals"
	invEpochsBounded = "M2 epochs per fault bounded"
)

type healing struct {
	budget int
	// from is when the last fault ended: the heal (healedAt), or earlier
	// when a script says so (faultsOver).
	from time.Time
	// at is when every node first stood healed after the heal (zero: not
	// yet); maxEpoch the highest epoch number any node learned.
	at       time.Time
	maxEpoch uint64
}

func (s *Sim) budget(k int) { s.heal.budget += k }

// faultsOver marks the end of a script's last fault: healing is measured
// and bounded from now.
func (s *Sim) faultsOver() {
	if s.now.Before(s.heal.from) {
		s.heal.from = s.now
	}
}

// healBound: a node removed during the faults is rejoined in gossip within
// GossipRetryMax of the heal, may wait out its restart gate
// (EpochLease + Skew), and joins; a member that is down at the heal may
// first be agreed down (DownAfter plus memberlist's dead detection). Four
// seconds of slack cover the agreement rounds of several joins at once
// (each round's backoff grows to 3 × 8 × RetryInterval).
func (s *Sim) healBound() time.Duration {
	return s.downAfter + deadAfter + simEpochLease + simSkew + 4*time.Second
}

// checkHealing runs on every gossip tick after the heal.
func (s *Sim) checkHealing() {
	if s.skipHealing() || s.now.Before(s.heal.from) || !s.heal.at.IsZero() {
		return
	}
	if why := s.unhealed(); why == "" {
		s.heal.at = s.now
		s.trace("healed after %v", s.now.Sub(s.heal.from))
		return
	}
	if s.now.Sub(s.heal.from) > s.healBound() && !s.quorumLost() {
		s.check.fail(invHealing, "not healed %v after the last fault (bound %v): %s", s.now.Sub(s.heal.from), s.healBound(), s.unhealed())
	}
}

// unhealed says why membership is not whole now ("" if it is).
func (s *Sim) unhealed() string {
	var number uint64
	for _, n := range s.nodes {
		if n.gone {
			continue
		}
		if !n.up() {
			return fmt.Sprintf("%s is down", n.id)
		}
		l, ok := n.core.Current()
		if !ok {
			return fmt.Sprintf("%s knows no epoch", n.id)
		}
		if number == 0 {
			number = l.Epoch.Number
		} else if l.Epoch.Number != number {
			return fmt.Sprintf("%s is at epoch %d, another node at %d", n.id, l.Epoch.Number, number)
		}
		now := n.local(s.now)
		if ok, why := n.core.Lockable(now); !ok {
			return fmt.Sprintf("%s: %s", n.id, why)
		}
		if !n.core.LiveUntil().After(now) {
			return fmt.Sprintf("%s holds no epoch liveness", n.id)
		}
	}
	return ""
}

// noteEpoch records the highest epoch learned (checker.learned's caller).
func (s *Sim) noteEpochNumber(number uint64) {
	if number > s.heal.maxEpoch {
		s.heal.maxEpoch = number
		if !s.skipHealing() && int(number) > 1+s.heal.budget {
			s.check.fail(invEpochsBounded, "epoch %d learned; the faults so far allow at most %d", number, 1+s.heal.budget)
		}
	}
}

// finalHealing: the run ended without healing within the bound.
func (s *Sim) finalHealing() {
	if s.skipHealing() || !s.heal.at.IsZero() || s.stopped || s.quorumLost() {
		return
	}
	s.check.fail(invHealing, "not healed by the end of the run, %v after the last fault: %s", s.now.Sub(s.heal.from), s.unhealed())
}

// quorumLost reports whether wipes (SimConfig.Wipes) left the latest epoch
// any node runs without a majority of its stores: a wiped store's entry
// can only be replaced by an epoch that a majority of the current one
// accepts, and a wiped store accepts nothing. A wipe waits for a whole
// cluster of three or more, but faults after it (a leave, removals of
// nodes that look down) can still shrink the epoch to the wiped store and
// one other before the new store is let in: seeds 1,218 and 5,224 of the
// first wipe runs. No protocol heals that, so the healing (M1) and
// progress (I5) checks stand down for the run, which says so in its
// faults ("quorum_lost"); every safety check still runs.
func (s *Sim) quorumLost() bool {
	if s.faults["wipe"] == 0 {
		return false
	}
	var latest *msg.Epoch
	for _, n := range s.nodes {
		if n.core == nil {
			continue
		}
		if l, ok := n.core.Current(); ok && (latest == nil || l.Epoch.Number > latest.Number) {
			latest = &l.Epoch
		}
	}
	if latest == nil {
		return false
	}
	intact := 0
	for _, m := range latest.Members {
		if n := s.nodeByID(m.ID); n != nil && !n.gone && n.disk.Store == m.Store {
			intact++
		}
	}
	if intact > len(latest.Members)/2 {
		return false
	}
	if s.faults["quorum_lost"] == 0 {
		s.faults["quorum_lost"]++
		s.trace("quorum lost: epoch %d has %d of %d stores left; healing and progress not checked", latest.Number, intact, len(latest.Members))
	}
	return true
}

// skipHealing: a run with a mutation checks no healing unless told to.
func (s *Sim) skipHealing() bool { return s.cfg.Mutations.Any() && !s.cfg.HealingUnderMutation }
