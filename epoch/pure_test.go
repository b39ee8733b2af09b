package epoch

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

func TestBallotOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b msg.Ballot
		want int
	}{
		{msg.Ballot{}, msg.Ballot{Counter: 1, Node: "a"}, -1}, // zero is below every proposal
		{msg.Ballot{Counter: 1, Node: "b"}, msg.Ballot{Counter: 2, Node: "a"}, -1},
		{msg.Ballot{Counter: 2, Node: "a"}, msg.Ballot{Counter: 2, Node: "b"}, -1}, // ties by node ID
		{msg.Ballot{Counter: 2, Node: "b"}, msg.Ballot{Counter: 2, Node: "b"}, 0},
		{msg.Ballot{Counter: 3, Node: "a"}, msg.Ballot{Counter: 2, Node: "z"}, 1},
	} {
		equal(t, tc.want, tc.a.Compare(tc.b), "%v vs %v", tc.a, tc.b)
	}
}

func members(ids ...string) []msg.Member {
	var ms []msg.Member
	for _, id := range ids {
		ms = append(ms, testCfg(id).Self)
	}
	msg.SortMembers(ms)
	return ms
}

func TestVerifyCert(t *testing.T) {
	e1 := msg.Epoch{Number: 1, Members: members("a", "b", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	e2 := msg.Epoch{Number: 2, Members: members("a", "b"), Caps: e1.Caps}
	bal := msg.Ballot{Counter: 4, Node: "a"}
	good := msg.Certificate{Ballot: bal, Acceptors: members("a", "c"), Prev: e1}
	other := e1.Clone()
	other.Members[2].Addr = "elsewhere:1"
	wiped := members("a", "c")
	wiped[1].Store++
	e0 := msg.Epoch{Number: 0, Members: e1.Members, Caps: e1.Caps}
	e1bad := msg.Epoch{Number: 1, Members: members("a", "b"), Caps: e1.Caps}
	for _, tc := range []struct {
		name  string
		e     msg.Epoch
		c     msg.Certificate
		known *msg.Epoch
		want  error
	}{
		{"valid against the epoch we know", e2, good, &e1, nil},
		{"valid when further behind (checked against Prev)", e2, good, nil, nil},
		{"made in another epoch 1", e2, msg.Certificate{Ballot: bal, Acceptors: members("a", "c"), Prev: other}, &e1, errCertPrev},
		{"prev is not number-1", e2, msg.Certificate{Ballot: bal, Acceptors: members("a", "c"), Prev: e0}, nil, errCertNumber},
		{"minority", e2, msg.Certificate{Ballot: bal, Acceptors: members("a"), Prev: e1}, &e1, errCertMajority},
		{"same acceptor twice", e2, msg.Certificate{Ballot: bal, Acceptors: append(members("a"), members("a")...), Prev: e1}, &e1, errCertDup},
		{"acceptor not a member", e2, msg.Certificate{Ballot: bal, Acceptors: members("a", "z"), Prev: e1}, &e1, errCertAcceptor},
		{"wiped store is not the member (H17)", e2, msg.Certificate{Ballot: bal, Acceptors: wiped, Prev: e1}, &e1, errCertAcceptor},
		{"zero ballot", e2, msg.Certificate{Acceptors: members("a", "c"), Prev: e1}, &e1, errCertBallot},
		{"unsorted members", msg.Epoch{Number: 2, Members: []msg.Member{e1.Members[1], e1.Members[0]}}, good, &e1, errEpochShape},
		{"epoch 1 must equal the initial members", e1bad, msg.Certificate{Ballot: bal, Acceptors: members("a", "b"), Prev: e0}, &e0, errEpochOne},
		{"epoch 0 is never learned from the network", e0, good, nil, errCertNumber},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyCert(tc.e, tc.c, tc.known)
			must(t, errors.Is(err, tc.want), "got %v, want %v", err, tc.want)
		})
	}
}

// Certificates never mix ballots: Accepted replies to an earlier ballot of
// the same proposer are not counted (H7's rule for agreement).
//
// certificateOneBallot: a stray Accepted of an earlier ballot arrives while
// the proposer is at phase 2 of a later one; it reports whether it completed
// a certificate.
func certificateOneBallot() bool {
	c, ms := startedCluster("a", "b", "c")
	a := c.nodes["a"]
	c.out("a", a.ProposeRemove(c.now, ms[2]))
	c.deliver(and(kind(msg.KindPrepare), to("b")))
	c.deliver(and(kind(msg.KindPromise), to("a")))
	c.q.Clear() // the Accept for ballot 1 is lost everywhere but at a itself
	b1 := a.prop.ballot
	c.advance(time.Second)
	c.tick("a") // retry: ballot 2
	c.drop(func(e msg.Envelope) bool { return e.Body.Kind() != msg.KindPrepare || e.To != "b" })
	// A stray Accepted for ballot 1 from b arrives while a is at phase 2 of ballot 2.
	c.deliver(and(kind(msg.KindPrepare), to("b")))
	c.deliver(and(kind(msg.KindPromise), to("a")))
	c.q.Clear()
	o := a.Step(c.now, c.nodes["b"].envelopeTo("a", msg.Accepted{Instance: 2, Ballot: b1, OK: true, Promised: b1}))
	return o.Learned != nil
}

func TestCertificateOneBallot(t *testing.T) {
	mustNot(t, certificateOneBallot(), "an Accepted for an earlier ballot completed a certificate")
}

func TestLiveEnd(t *testing.T) {
	t0 := time.Unix(100, 0)
	for _, tc := range []struct {
		lease time.Duration
		drift float64
		want  time.Duration
	}{
		{3 * time.Second, 0, 3 * time.Second},
		{3 * time.Second, 0.01, 2970 * time.Millisecond},
		{10 * time.Second, 0.05, 9500 * time.Millisecond},
		{0, 0.01, 0},
	} {
		equal(t, t0.Add(tc.want), liveEnd(t0, tc.lease, tc.drift), "lease %v drift %v", tc.lease, tc.drift)
	}
	// A clock running slow by MaxDrift still ends the liveness within
	// EpochLease of true time (the E2 arithmetic).
	lease, drift := 3*time.Second, 0.01
	local := liveEnd(t0, lease, drift).Sub(t0)
	trueDur := time.Duration(float64(local) / (1 - drift))
	must(t, trueDur <= lease, "true duration %v", trueDur)
}

func TestRenewalAnswerRules(t *testing.T) {
	c, ms := startedCluster("a", "b", "c")
	a := c.nodes["a"]
	l, _, _ := a.Current()
	d := l.Epoch.Digest()
	outsider := testCfg("z").Self
	wiped := ms[1]
	wiped.Store++
	for _, tc := range []struct {
		name   string
		sender msg.Member
		num    uint64
		digest uint64
		want   msg.RenewalResult
	}{
		{"member, same epoch", ms[1], 1, d, msg.RenewalOK},
		{"older epoch", ms[1], 0, 1, msg.RenewalNewerEpoch},
		{"newer epoch", ms[1], 2, 1, msg.RenewalUnknownEpoch},
		{"same number, other digest", ms[1], 1, d + 1, msg.RenewalUnknownEpoch},
		{"non-member (H14)", outsider, 1, d, msg.RenewalNotMember},
		{"wiped store (H17)", wiped, 1, d, msg.RenewalNotMember},
	} {
		res, _ := a.renewalResult(tc.sender, tc.num, tc.digest)
		equal(t, tc.want, res, tc.name)
	}
	// After promising instance 2: promisedHigher, naming the instance.
	c.out("b", c.nodes["b"].ProposeRemove(c.now, ms[2]))
	c.deliver(and(kind(msg.KindPrepare), to("a")))
	res, inst := a.renewalResult(ms[1], 1, d)
	equal(t, msg.RenewalPromisedHigher, res)
	equal(t, uint64(2), inst)
	// A node that learned nothing knows no epoch.
	fresh := New(testCfg("q"), State{})
	res, _ = fresh.renewalResult(ms[1], 1, d)
	equal(t, msg.RenewalUnknownEpoch, res)
}

func TestBootstrap(t *testing.T) {
	c, ms := startedCluster("c", "a", "b")
	for _, id := range []string{"a", "b", "c"} {
		l, at, ok := c.nodes[msg.NodeID(id)].Current()
		must(t, ok)
		equal(t, uint64(1), l.Epoch.Number)
		equal(t, members("a", "b", "c"), l.Epoch.Members)
		equal(t, msg.RingV1, l.Epoch.Caps.Ring)
		must(t, verifyCert(l.Epoch, l.Cert, nil) == nil)
		must(t, !at.IsZero())
	}
	_ = ms
	// Restart: the epoch comes back with the zero learnedAt; a round is due.
	m := New(testCfg("a"), state(c.disks["a"]))
	l, at, ok := m.Current()
	must(t, ok && l.Epoch.Number == 1 && at.IsZero())
	equal(t, DueNow, m.NextDeadline())
	equal(t, time.Time{}, m.LiveUntil())
	// Bootstrap again is a no-op: numbers only grow.
	must(t, m.Bootstrap(c.now, ms).Empty())
}

func TestBootstrapWithoutLowest(t *testing.T) {
	c, ms := newCluster("a", "b", "c")
	c.bootstrap(ms, "b", "c") // a never starts
	delete(c.nodes, "a")
	for range 30 {
		c.advance(simCfg.RetryInterval)
		c.tick("b")
		c.tick("c")
		c.deliverAll()
	}
	equal(t, uint64(1), c.epoch("b").Number, "b or c completes epoch 1 after PromiseTimeout")
	equal(t, c.epoch("b").Digest(), c.epoch("c").Digest())
}

func TestBootstrapDifferentListRefused(t *testing.T) {
	c, ms := newCluster("a", "b", "c")
	c.bootstrap(ms, "a", "b")
	c.out("c", c.nodes["c"].Bootstrap(c.now, append(ms, testCfg("d").Self)))
	for range 30 {
		c.advance(simCfg.RetryInterval)
		for _, id := range []string{"a", "b", "c"} {
			c.tick(id)
		}
		c.deliverAll()
	}
	equal(t, uint64(1), c.epoch("a").Number)
	equal(t, uint64(0), c.epoch("c").Number, "a node given a different initial list refuses to join")
	mustNot(t, c.forked())
	for _, r := range c.disks["c"].Acceptors() {
		must(t, r.Value == nil, "c accepted nothing")
	}
}

// Duelling proposers with different values converge (randomised backoff).
func TestDuelConverges(t *testing.T) {
	c, ms := startedCluster("a", "b", "c", "d", "e")
	for i, id := range []string{"a", "b", "c"} {
		c.out(msg.NodeID(id), c.nodes[msg.NodeID(id)].ProposeRemove(c.now, ms[4-i]))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		// deliver in random order
		c.q.Shuffle(rng)
		n := c.q.Len()
		for range n {
			if c.q.Len() == 0 {
				break
			}
			env := c.q.TakeAt(0)
			if m, ok := c.nodes[env.To]; ok {
				c.out(env.To, m.Step(c.now, env))
			}
		}
		c.advance(5 * time.Millisecond)
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			c.tick(id)
		}
	}
	mustNot(t, c.forked())
	e := c.epoch("a")
	must(t, e.Number >= 2, "at least one change was agreed, got epoch %d", e.Number)
	must(t, !e.Has(ms[4]) && !e.Has(ms[3]) && !e.Has(ms[2]), "every wanted removal is eventually in: %v", simtest.Members(e))
}
