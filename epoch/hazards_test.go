package epoch

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// Named regression schedules. Each must pass with its rule; its RuleOff
// twin in mutations_test.go (built with the homelock_mutations tag) runs it
// with the rule switched off by a test knob and must show the failure, so
// the test is known to test something.

func from(id string) func(msg.Envelope) bool {
	return func(e msg.Envelope) bool { return e.From.ID == msg.NodeID(id) }
}

// Seed 003 / E1: an acceptor that promised ballot b2, crashed and forgot it,
// then accepted b1 lets a (b1) and b (b2) each get a certificate for a
// different epoch 2.
func forgottenPromiseSchedule(t *testing.T) (forked bool) {
	c, ms := startedCluster("a", "b", "c")
	a, b := c.nodes["a"], c.nodes["b"]
	c.out("a", a.ProposeRemove(c.now, ms[1])) // a wants {a, c}
	c.deliver(and(kind(msg.KindPrepare), from("a"), to("c")))
	c.out("b", b.ProposeRemove(c.now, ms[0])) // b wants {b, c}
	c.deliver(and(kind(msg.KindPrepare), from("b"), to("c")))
	c.crash("c")
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindPromise), from("c"), to("a")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), from("a"), to("c")))
	c.deliver(and(kind(msg.KindAccepted), from("c"), to("a")))
	c.drop(from("a"))
	c.deliver(and(kind(msg.KindPromise), from("c"), to("b")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), from("b"), to("c")))
	c.deliver(and(kind(msg.KindAccepted), from("c"), to("b")))
	equal(t, uint64(2), c.epoch("b").Number, "b's proposal must win")
	return c.forked()
}

func TestForgottenPromiseForks(t *testing.T) {
	mustNot(t, forgottenPromiseSchedule(t), "E1 with promises persisted")
}

// Seed 003 / E1: an acceptor whose acceptance of a's epoch was lost in a
// crash reports nothing accepted to b, so b chooses a different epoch 2.
func forgottenAcceptanceSchedule(t *testing.T) (forked bool) {
	c, ms := startedCluster("a", "b", "c")
	a, b := c.nodes["a"], c.nodes["b"]
	c.out("a", a.ProposeRemove(c.now, ms[1])) // a wants {a, c}
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindPrepare), to("c")))
	c.deliver(and(kind(msg.KindPromise), to("a")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), to("c")))
	c.deliver(and(kind(msg.KindAccepted), to("a")))
	equal(t, uint64(2), c.epoch("a").Number)
	c.drop(from("a")) // its Learns are lost
	c.crash("c")
	c.out("b", b.ProposeRemove(c.now, ms[0])) // b wants {b, c}
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindPrepare), to("c")))
	c.deliver(and(kind(msg.KindPromise), to("b")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), to("c")))
	c.deliver(and(kind(msg.KindAccepted), to("b")))
	equal(t, uint64(2), c.epoch("b").Number)
	return c.forked()
}

func TestForgottenAcceptanceForks(t *testing.T) {
	mustNot(t, forgottenAcceptanceSchedule(t), "E1 with acceptances persisted: b adopts a's epoch")
}

// H7: ok answers from two rounds never add up to a majority.
func h7Schedule(t *testing.T) (extended bool) {
	c, _ := startedCluster("a", "b", "c", "d", "e")
	e := c.nodes["e"]
	before := e.LiveUntil()
	mustNot(t, before.IsZero())
	c.now = e.live.nextRound
	c.tick("e") // round 1: only a answers
	c.deliver(between("e", "a"))
	c.q.Clear()
	c.now = e.live.nextRound
	c.tick("e") // round 2: only b answers
	c.deliver(between("e", "b"))
	c.q.Clear()
	return e.LiveUntil().After(before)
}

func TestH7OneRoundPerMajority(t *testing.T) {
	mustNot(t, h7Schedule(t), "two rounds of 2 ok answers each must not grant liveness")
}

// H8 and H10: learning epoch n+1 drops liveness for n in that very step, and
// that step returns the epoch for syncing before any message under it.
func TestH8LearnDropsLiveness(t *testing.T) {
	c, ms := startedCluster("a", "b", "c")
	a := c.nodes["a"]
	must(t, a.LiveUntil().After(c.now))
	renewal := func(e msg.Envelope) bool {
		k := e.Body.Kind()
		return k == msg.KindRenewal || k == msg.KindRenewalAnswer
	}
	c.out("a", a.ProposeRemove(c.now, ms[2]))
	var learnedOut Output
	for c.q.Len() > 0 && learnedOut.Learned == nil {
		env, ok := c.q.Take(func(e msg.Envelope) bool { return !renewal(e) })
		if !ok {
			break
		}
		o := c.out(env.To, c.nodes[env.To].Step(c.now, env))
		if env.To == "a" && o.NewEpoch {
			learnedOut = o
		}
	}
	must(t, learnedOut.Learned != nil)
	equal(t, uint64(2), learnedOut.Learned.Epoch.Number)
	must(t, a.LiveUntil().IsZero(), "E2/H8: no liveness for epoch 1 after learning epoch 2")
	for _, m := range learnedOut.Msgs {
		equal(t, uint64(2), m.Epoch, "H10: messages of that step speak epoch 2, which the same Output syncs first")
	}
	c.deliverAll()
	must(t, a.LiveUntil().After(c.now), "a new round for epoch 2 grants liveness again")
}

// H14: a removed member runs no rounds, and members answer its renewals
// notMember.
func h14Schedule(t *testing.T) msg.RenewalResult {
	c, ms := startedCluster("a", "b", "c")
	c.out("a", c.nodes["a"].ProposeRemove(c.now, ms[2]))
	c.deliverAll()
	x := c.nodes["c"]
	equal(t, uint64(2), x.learned.Epoch.Number)
	mustNot(t, x.learned.Epoch.Has(ms[2]))
	must(t, x.LiveUntil().IsZero())
	c.advance(simCfg.EpochLease)
	o := c.tick("c")
	for _, m := range o.Msgs {
		notEqual(t, msg.KindRenewal, m.Body.Kind(), "H14: no renewal rounds for a non-member")
	}
	o = c.nodes["a"].Step(c.now, x.envelopeTo("a", msg.Renewal{Nonce: 9}))
	equal(t, 1, len(o.Msgs))
	return o.Msgs[0].Body.(msg.RenewalAnswer).Result
}

func TestH14NoRenewalForNonMembers(t *testing.T) {
	equal(t, msg.RenewalNotMember, h14Schedule(t))
}

// H15: a node that promised n+1 does not count itself in a round for n.
func h15Schedule(t *testing.T) (extended bool) {
	c, ms := startedCluster("a", "b", "c")
	x := c.nodes["c"]
	c.out("a", c.nodes["a"].ProposeRemove(c.now, ms[1]))
	c.deliver(and(kind(msg.KindPrepare), to("c"))) // c promises instance 2
	c.q.Clear()                                    // a dies
	x.ClockJump()                                  // liveness gone; a new round is due
	c.advance(time.Millisecond)
	c.tick("c")
	c.deliver(between("b", "c")) // b has promised nothing: ok
	return !x.LiveUntil().IsZero()
}

func TestH15NoSelfCountAfterPromise(t *testing.T) {
	mustNot(t, h15Schedule(t), "one ok plus a self that promised 2 is no majority")
}

// H16: a proposer dies after one Prepare; the member holding the stray
// promise completes instance n+1 (unchanged membership) after PromiseTimeout.
func h16Schedule(t *testing.T) (completed bool) {
	c, ms := startedCluster("a", "b", "c")
	c.out("a", c.nodes["a"].ProposeRemove(c.now, ms[2]))
	c.deliver(and(kind(msg.KindPrepare), to("b")))
	delete(c.nodes, "a") // a is gone for good
	c.drop(func(e msg.Envelope) bool {
		return e.Body.Kind() != msg.KindRenewal && e.Body.Kind() != msg.KindRenewalAnswer
	})
	for range 40 {
		c.advance(simCfg.RetryInterval)
		c.tick("b")
		c.tick("c")
		c.deliverAll()
	}
	e := c.epoch("b")
	if e.Number != 2 {
		return false
	}
	equal(t, c.epoch("c").Digest(), e.Digest())
	equal(t, 3, len(e.Members), "nothing was accepted: the unchanged membership is proposed")
	must(t, c.nodes["b"].LiveUntil().After(c.now), "b and c hold liveness again")
	return true
}

func TestH16StrayPromiseCompleted(t *testing.T) {
	must(t, h16Schedule(t))
}

// H17: a wiped disk under a reused node ID is no acceptor: with a blank
// record it would promise and accept against its earlier acceptance.
func h17Schedule(t *testing.T) (forked bool) {
	c, ms := startedCluster("a", "b", "x")
	a, b := c.nodes["a"], c.nodes["b"]
	c.out("a", a.ProposeRemove(c.now, ms[1])) // a: {a, x}
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindPrepare), to("x")))
	c.deliver(and(kind(msg.KindPromise), to("a")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), to("x")))
	c.deliver(and(kind(msg.KindAccepted), to("a")))
	equal(t, uint64(2), c.epoch("a").Number)
	c.q.Clear()
	// x's disk is wiped: same node ID, new store, no state.
	cfg := c.cfgs["x"]
	cfg.Self.Store++
	x2 := c.add(cfg, State{})
	l1, _, _ := b.Current()
	c.out("x", x2.Step(c.now, b.envelopeTo("x", msg.Learn{Epoch: l1.Epoch, Cert: l1.Cert})))
	equal(t, uint64(1), c.epoch("x").Number)
	c.q.Clear()
	c.out("b", b.ProposeRemove(c.now, ms[0])) // b: {b, x}
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindPrepare), to("x")))
	c.deliver(and(kind(msg.KindPromise), to("b")))
	c.drop(between("a", "b"))
	c.deliver(and(kind(msg.KindAccept), to("x")))
	c.deliver(and(kind(msg.KindAccepted), to("b")))
	return c.forked()
}

func TestH17WipedDiskIsNoAcceptor(t *testing.T) {
	mustNot(t, h17Schedule(t))
}

// H21: a wiped node rejoins under its old node ID while the old member is
// still in the epoch: the join replaces the entry.
func h21Schedule(t *testing.T) msg.Epoch {
	c, ms := startedCluster("a", "b", "x")
	cfg := c.cfgs["x"]
	cfg.Self.Store++
	x2 := c.add(cfg, State{})
	c.out("a", c.nodes["a"].Step(c.now, x2.envelopeTo("a", msg.Join{Member: cfg.Self})))
	for range 20 {
		c.deliverAll()
		c.advance(simCfg.RetryInterval)
		for _, id := range []string{"a", "b", "x"} {
			c.tick(id)
		}
	}
	e := c.epoch("a")
	must(t, e.Has(ms[0]) && e.Has(ms[1]))
	return e
}

func TestH21JoinReplacesEntry(t *testing.T) {
	e := h21Schedule(t)
	equal(t, uint64(2), e.Number)
	equal(t, 3, len(e.Members))
	x, _ := e.Member("x")
	notEqual(t, testCfg("x").Self.Store, x.Store, "the new store replaced the old one")
}
