package lockcheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// The checker's rules for what a holder may do, each from a schedule small
// enough to read: the nodes have perfect clocks, the home h is the only
// member of its epoch (so L1 needs no renewal rounds), and every step is
// fed as a driver feeds it (Observe, then Step).

var base = time.Unix(1_000_000, 0)

const (
	lease = time.Second
	drift = 0.01
)

type fakeNode struct {
	id      msg.NodeID
	idx     int
	clock   simtest.Clock
	learned *epoch.Learned
}

func (n *fakeNode) Name() msg.NodeID             { return n.id }
func (n *fakeNode) Index() int                   { return n.idx }
func (n *fakeNode) Gen() uint64                  { return 1 }
func (n *fakeNode) Running() bool                { return true }
func (n *fakeNode) Local(t time.Time) time.Time  { return n.clock.Local(t) }
func (n *fakeNode) TrueAt(l time.Time) time.Time { return n.clock.True(l) }
func (n *fakeNode) Inc() uint64                  { return 1 }
func (n *fakeNode) Learned() *epoch.Learned      { return n.learned }
func (n *fakeNode) Version() uint32              { return 1 }

type world struct {
	t      *testing.T
	now    time.Time
	nodes  []*fakeNode
	c      *Checker
	broken []string
}

func newWorld(t *testing.T, ids ...msg.NodeID) *world {
	w := &world{t: t, now: base}
	home := msg.Member{ID: ids[0], Store: 1, Version: 1}
	l := &epoch.Learned{Epoch: msg.Epoch{Number: 1, Members: []msg.Member{home}}}
	for i, id := range ids {
		w.nodes = append(w.nodes, &fakeNode{id: id, idx: i, clock: simtest.NewClock(base, 0, 1), learned: l})
	}
	w.c = New(World{
		Now:  func() time.Time { return w.now },
		Node: func(i int) Node { return w.nodes[i] },
		ByID: func(id msg.NodeID) Node {
			for _, n := range w.nodes {
				if n.id == id {
					return n
				}
			}
			return nil
		},
		Fail: func(inv, _ string, _ ...any) { w.broken = append(w.broken, inv) },
		Base: base, Skew: 150 * time.Millisecond, EpochLease: 3 * time.Second,
		Retry: 50 * time.Millisecond, Drift: drift,
	})
	return w
}

func (w *world) at(d time.Duration) { w.now = base.Add(d) }

// step is one step of node i: what it received, what it sent, its events.
func (w *world) step(i int, in []msg.Envelope, out []msg.Envelope, events ...delegation.Event) {
	var obs []seen
	for _, e := range in {
		obs = append(obs, seen{e, false})
	}
	for _, e := range out {
		obs = append(obs, seen{e, true})
	}
	w.stepIn(i, obs, events...)
}

type seen struct {
	env  msg.Envelope
	sent bool
}

// stepIn is a step whose messages were sent and received in the order of
// obs (a node's messages to itself).
func (w *world) stepIn(i int, obs []seen, events ...delegation.Event) {
	n := w.nodes[i]
	for _, o := range obs {
		w.c.Observe(n, o.env, o.sent)
	}
	w.c.Step(n, nil, events)
}

func env(from, to msg.NodeID, b msg.Body) msg.Envelope {
	return msg.Envelope{From: msg.Member{ID: from, Store: 1, Version: 1}, To: to, Epoch: 1, Version: 1, Body: b}
}

func tok(t *testing.T, s string) fence.Token {
	t.Helper()
	x, err := fence.ParseToken(s)
	require.NoError(t, err)
	return x
}

// shorten is a holder's lease, shortened by the drift bound.
func shorten(d time.Duration) time.Duration { return d - time.Duration(float64(d)*drift) }

// A home's own delegation is granted and renewed in one step (the messages
// never leave the process): the renewal counts, and a section may run to
// the renewed end, not past it.
func TestSameStepGrantAndRenewal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expiry time.Duration // the section's end, after the renewal at 50ms
		want   []string
	}{
		{"to the renewed end", 50*time.Millisecond + shorten(lease), nil},
		{"past it", 50*time.Millisecond + shorten(lease) + time.Millisecond, []string{InvHolderLease}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h")
			d := tok(t, "e1.i1.c1")
			req := msg.RequestID{Inc: 1, Seq: 1}
			acq := env("h", "h", msg.Acquire{Key: "k", Req: req, Attempt: 1, Lease: lease})
			w.step(0, nil, []msg.Envelope{acq})
			w.at(50 * time.Millisecond)
			grant := env("h", "h", msg.Grant{Key: "k", Req: req, Attempt: 1, Token: d, Lease: lease})
			renew := env("h", "h", msg.Renew{Key: "k", Token: d, Attempt: 1, Lease: lease})
			reply := env("h", "h", msg.RenewReply{Key: "k", Token: d, Attempt: 1, OK: true, Lease: lease})
			w.stepIn(0, []seen{{acq, false}, {grant, true}, {grant, false}, {renew, true}, {renew, false}, {reply, true}, {reply, false}},
				delegation.Event{Kind: delegation.Admitted, Key: "k", Locker: 1, Token: tok(t, "e1.i1.c1.s1"), Expires: base.Add(tc.expiry)})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// A holder forgets its outstanding renewal attempts once a reply extends
// its lease: a later reply to an attempt sent before that extends nothing.
func TestLateReplyToOlderAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		extended time.Duration // the section's end after both replies
		want     []string
	}{
		{"from the first reply", 200*time.Millisecond + shorten(lease), nil},
		{"from the older attempt's late reply", 300*time.Millisecond + shorten(lease), []string{InvHolderLease}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a")
			d := tok(t, "e1.i1.c1")
			req := msg.RequestID{Inc: 1, Seq: 1}
			acq := env("a", "h", msg.Acquire{Key: "k", Req: req, Attempt: 1, Lease: lease})
			w.step(1, nil, []msg.Envelope{acq})
			w.at(time.Millisecond)
			grant := env("h", "a", msg.Grant{Key: "k", Req: req, Attempt: 1, Token: d, Lease: lease})
			w.step(0, []msg.Envelope{acq}, []msg.Envelope{grant})
			w.at(2 * time.Millisecond)
			w.step(1, []msg.Envelope{grant}, nil,
				delegation.Event{Kind: delegation.Admitted, Key: "k", Locker: 1, Token: tok(t, "e1.i1.c1.s1"), Expires: base.Add(shorten(lease))})
			r1 := env("a", "h", msg.Renew{Key: "k", Token: d, Attempt: 1, Lease: lease})
			r2 := env("a", "h", msg.Renew{Key: "k", Token: d, Attempt: 2, Lease: lease})
			w.at(200 * time.Millisecond)
			w.step(1, nil, []msg.Envelope{r1})
			w.at(300 * time.Millisecond)
			w.step(1, nil, []msg.Envelope{r2})
			rr1 := env("h", "a", msg.RenewReply{Key: "k", Token: d, Attempt: 1, OK: true, Lease: lease})
			rr2 := env("h", "a", msg.RenewReply{Key: "k", Token: d, Attempt: 2, OK: true, Lease: lease})
			w.at(400 * time.Millisecond)
			w.step(0, []msg.Envelope{r1, r2}, []msg.Envelope{rr1, rr2})
			// Reply 1 extends the lease; reply 2 echoes an attempt sent
			// before that, which the holder no longer knows.
			w.at(410 * time.Millisecond)
			w.step(1, []msg.Envelope{rr1}, nil)
			w.at(420 * time.Millisecond)
			w.step(1, []msg.Envelope{rr2}, nil,
				delegation.Event{Kind: delegation.Extended, Key: "k", Locker: 1, Token: tok(t, "e1.i1.c1.s1"), Expires: base.Add(tc.extended)})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// A holder leaves out of its Reclaim answer a delegation whose lease ran out
// before a late renewal reply came: it dropped it, and the reply could not
// bring it back, so the home may grant the key again. Left out while the
// holder surely keeps it, it misleads the home (seed 694,547 of the
// simulator: the first case).
func TestReclaimAnswerWithoutALapsedDelegation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replyAt time.Duration // 0: no reply
		omitAt  time.Duration
		want    []string
	}{
		{"after its lease ran out and a late reply", 1200 * time.Millisecond, 1300 * time.Millisecond, nil},
		{"while the holder surely keeps it", 0, 600 * time.Millisecond, []string{InvHomeView}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a", "b")
			d := tok(t, "e1.i1.c1")
			req := msg.RequestID{Inc: 1, Seq: 1}
			acq := env("a", "h", msg.Acquire{Key: "k", Req: req, Attempt: 1, Lease: lease})
			w.step(1, nil, []msg.Envelope{acq})
			w.at(10 * time.Millisecond)
			grant := env("h", "a", msg.Grant{Key: "k", Req: req, Attempt: 1, Token: d, Lease: lease})
			w.step(0, []msg.Envelope{acq}, []msg.Envelope{grant})
			w.at(20 * time.Millisecond)
			w.step(1, []msg.Envelope{grant}, nil)
			w.at(500 * time.Millisecond)
			renew := env("a", "h", msg.Renew{Key: "k", Token: d, Attempt: 1, Lease: lease})
			w.step(1, nil, []msg.Envelope{renew})
			if tc.replyAt > 0 {
				// The home was paused: it answers after the holder's lease
				// (to 990ms) ran out.
				w.at(tc.replyAt)
				reply := env("h", "a", msg.RenewReply{Key: "k", Token: d, Attempt: 1, OK: true, Lease: lease})
				w.step(0, []msg.Envelope{renew}, []msg.Envelope{reply})
				w.at(tc.replyAt + 10*time.Millisecond)
				w.step(1, []msg.Envelope{reply}, nil)
			}
			w.at(tc.omitAt)
			w.step(1, nil, []msg.Envelope{env("a", "h", msg.ReclaimAnswer{ForInc: 2})})
			w.at(tc.omitAt + 50*time.Millisecond)
			breq := msg.RequestID{Inc: 1, Seq: 1}
			b1 := env("b", "h", msg.Acquire{Key: "k", Req: breq, Attempt: 1, Lease: lease})
			w.step(2, nil, []msg.Envelope{b1})
			w.step(0, []msg.Envelope{b1}, []msg.Envelope{env("h", "b", msg.Grant{Key: "k", Req: breq, Attempt: 1, Token: tok(t, "e1.i2.c1"), Lease: lease})})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// FIFO by receipt: a requester's wait at its home ends with a Withdraw only
// of the newest request the home heard in it, as the home's waiter keeps the
// newest; a grant to a later requester while it waits breaks FIFO.
func TestWithdrawEndsOnlyTheNewestRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withdrawn uint64
		want      []string
	}{
		{"the newest", 2, nil},
		{"an older one", 1, []string{InvFIFOReceipt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a", "b")
			w.at(10 * time.Millisecond)
			a1 := env("a", "h", msg.Acquire{Key: "k", Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1, Lease: lease})
			// The home says why a waits once, under the request it heard
			// first; it does not say it again for the next one.
			wait := env("h", "a", msg.Wait{Key: "k", Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1, Reason: msg.WaitHolder})
			w.step(0, []msg.Envelope{a1}, []msg.Envelope{wait})
			w.at(20 * time.Millisecond)
			a2 := env("a", "h", msg.Acquire{Key: "k", Req: msg.RequestID{Inc: 1, Seq: 2}, Attempt: 1, Lease: lease})
			w.step(0, []msg.Envelope{a2}, nil)
			breq := msg.RequestID{Inc: 1, Seq: 1}
			b1 := env("b", "h", msg.Acquire{Key: "k", Req: breq, Attempt: 1, Lease: lease})
			w.step(2, nil, []msg.Envelope{b1})
			w.at(30 * time.Millisecond)
			w.step(0, []msg.Envelope{b1}, nil)
			w.at(40 * time.Millisecond)
			wd := env("a", "h", msg.Withdraw{Key: "k", Req: msg.RequestID{Inc: 1, Seq: tc.withdrawn}})
			w.step(0, []msg.Envelope{wd}, nil)
			w.at(50 * time.Millisecond)
			g := env("h", "b", msg.Grant{Key: "k", Req: breq, Attempt: 1, Token: tok(t, "e1.i1.c1"), Lease: lease})
			w.step(0, nil, []msg.Envelope{g})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// silenceThenOlderRequest: a (node 1) queues request {1 2} at home h at 10ms
// and goes silent for longer than StaleWaiters retries; at 220ms a late copy
// of its older request {1 1} reaches h; at 230ms b queues. It returns b's
// request.
func silenceThenOlderRequest(w *world) msg.RequestID {
	w.at(10 * time.Millisecond)
	w.step(0, []msg.Envelope{env("a", "h", msg.Acquire{Key: "k", Req: msg.RequestID{Inc: 1, Seq: 2}, Attempt: 1, Lease: lease})}, nil)
	w.at(10*time.Millisecond + home.StaleWaiters*50*time.Millisecond + 10*time.Millisecond)
	w.step(0, []msg.Envelope{env("a", "h", msg.Acquire{Key: "k", Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 31, Lease: lease})}, nil)
	w.at(230 * time.Millisecond)
	breq := msg.RequestID{Inc: 1, Seq: 1}
	b1 := env("b", "h", msg.Acquire{Key: "k", Req: breq, Attempt: 1, Lease: lease})
	w.step(2, nil, []msg.Envelope{b1})
	w.step(0, []msg.Envelope{b1}, nil)
	return breq
}

// After a silence long enough for the home to drop a waiter as stale, a late
// replay of an older request may queue a new waiter under that request, or
// refresh the old one under the newest: a Withdraw of either may end the
// wait, one of neither does not (seed 622,256 of the simulator).
func TestWithdrawAfterASilence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withdrawn uint64
		want      []string
	}{
		{"the replayed older request", 1, nil},
		{"the newest request", 2, nil},
		{"a request never heard", 3, []string{InvFIFOReceipt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a", "b")
			breq := silenceThenOlderRequest(w)
			w.at(240 * time.Millisecond)
			w.step(0, []msg.Envelope{env("a", "h", msg.Withdraw{Key: "k", Req: msg.RequestID{Inc: 1, Seq: tc.withdrawn}})}, nil)
			w.at(250 * time.Millisecond)
			w.step(0, nil, []msg.Envelope{env("h", "b", msg.Grant{Key: "k", Req: breq, Attempt: 1, Token: tok(t, "e1.i1.c1"), Lease: lease})})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// The same silence and late older request, then a Withdraw of that older
// one, then the requester asks again for its newest: the home may never
// have dropped its first waiter, which keeps its place from the start, so
// granting it ahead of a requester queued later keeps FIFO.
func TestWithdrawAfterASilenceMayLeaveTheFirstWaiter(t *testing.T) {
	w := newWorld(t, "h", "a", "b")
	silenceThenOlderRequest(w)
	newest, older := msg.RequestID{Inc: 1, Seq: 2}, msg.RequestID{Inc: 1, Seq: 1}
	w.at(240 * time.Millisecond)
	w.step(0, []msg.Envelope{env("a", "h", msg.Withdraw{Key: "k", Req: older})}, nil)
	w.at(250 * time.Millisecond)
	w.step(0, []msg.Envelope{env("a", "h", msg.Acquire{Key: "k", Req: newest, Attempt: 2, Lease: lease})}, nil)
	w.at(260 * time.Millisecond)
	w.step(0, nil, []msg.Envelope{env("h", "a", msg.Grant{Key: "k", Req: newest, Attempt: 2, Token: tok(t, "e1.i1.c1"), Lease: lease})})
	require.Empty(t, w.broken)
}

// A late retransmission of a request already granted queues anew at the
// home (under that old request), and the requester's Withdraw of it ends
// that wait: granting the next requester then keeps FIFO.
func TestWithdrawOfARequeuedOldRequest(t *testing.T) {
	w := newWorld(t, "h", "a", "b")
	old, cur := msg.RequestID{Inc: 1, Seq: 1}, msg.RequestID{Inc: 1, Seq: 2}
	acq := env("a", "h", msg.Acquire{Key: "k", Req: cur, Attempt: 1, Lease: lease})
	w.step(1, nil, []msg.Envelope{acq})
	w.at(10 * time.Millisecond)
	g := env("h", "a", msg.Grant{Key: "k", Req: cur, Attempt: 1, Token: tok(t, "e1.i1.c1"), Lease: lease})
	w.step(0, []msg.Envelope{acq}, []msg.Envelope{g})
	w.at(20 * time.Millisecond)
	late := env("a", "h", msg.Acquire{Key: "k", Req: old, Attempt: 9, Lease: lease})
	w.step(0, []msg.Envelope{late}, []msg.Envelope{env("h", "a", msg.Wait{Key: "k", Req: old, Attempt: 9, Reason: msg.WaitHolder})})
	breq := msg.RequestID{Inc: 1, Seq: 1}
	b1 := env("b", "h", msg.Acquire{Key: "k", Req: breq, Attempt: 1, Lease: lease})
	w.step(2, nil, []msg.Envelope{b1})
	w.at(30 * time.Millisecond)
	w.step(0, []msg.Envelope{b1, env("a", "h", msg.Withdraw{Key: "k", Req: old})}, nil)
	w.at(40 * time.Millisecond)
	rel := env("a", "h", msg.Release{Key: "k", Token: tok(t, "e1.i1.c1")})
	w.step(1, []msg.Envelope{g}, []msg.Envelope{rel})
	w.step(0, []msg.Envelope{rel}, []msg.Envelope{env("h", "b", msg.Grant{Key: "k", Req: breq, Attempt: 1, Token: tok(t, "e1.i1.c2"), Lease: lease})})
	require.Empty(t, w.broken)
}

// A home that grants an older request of a and, in the same step, hears a
// newer one (a gave the key back and asked again at once) queues a anew
// from that step: a grant to that newer request later is fair to b if b
// queued after that step, and breaks FIFO if b queued before it. The
// checker used to end a's wait at the grant and start it again at a's next
// retransmission (seed 56,007 of the simulator).
func TestOlderRequestGrantedNewerHeard(t *testing.T) {
	for _, tc := range []struct {
		name string
		bAt  time.Duration
		want []string
	}{
		{"b queued after", 40 * time.Millisecond, nil},
		{"b queued before", 20 * time.Millisecond, []string{InvFIFOReceipt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a", "b")
			old, newer := msg.RequestID{Inc: 1, Seq: 1}, msg.RequestID{Inc: 1, Seq: 2}
			breq := msg.RequestID{Inc: 1, Seq: 1}
			b1 := env("b", "h", msg.Acquire{Key: "k", Req: breq, Attempt: 1, Lease: lease})
			bAsks := func() {
				w.at(tc.bAt)
				w.step(2, nil, []msg.Envelope{b1})
				w.step(0, []msg.Envelope{b1}, nil)
			}
			a1 := env("a", "h", msg.Acquire{Key: "k", Req: old, Attempt: 1, Lease: lease})
			w.at(10 * time.Millisecond)
			w.step(1, nil, []msg.Envelope{a1})
			w.step(0, []msg.Envelope{a1}, nil)
			if tc.bAt < 30*time.Millisecond {
				bAsks()
			}
			w.at(30 * time.Millisecond)
			a2 := env("a", "h", msg.Acquire{Key: "k", Req: newer, Attempt: 1, Lease: lease, Queued: true})
			w.step(1, nil, []msg.Envelope{a2})
			g1 := env("h", "a", msg.Grant{Key: "k", Req: old, Attempt: 1, Token: tok(t, "e1.i1.c1"), Lease: lease})
			w.step(0, []msg.Envelope{a2}, []msg.Envelope{g1})
			rel := env("a", "h", msg.Release{Key: "k", Token: tok(t, "e1.i1.c1")})
			w.step(1, []msg.Envelope{g1}, []msg.Envelope{rel}) // a gives it back unused
			if tc.bAt > 30*time.Millisecond {
				bAsks()
			}
			w.at(50 * time.Millisecond)
			a3 := env("a", "h", msg.Acquire{Key: "k", Req: newer, Attempt: 2, Lease: lease})
			w.step(1, nil, []msg.Envelope{a3})
			w.step(0, []msg.Envelope{a3}, nil)
			w.at(60 * time.Millisecond)
			w.step(0, []msg.Envelope{rel}, []msg.Envelope{env("h", "a", msg.Grant{Key: "k", Req: newer, Attempt: 2, Token: tok(t, "e1.i1.c2"), Lease: lease})})
			require.Equal(t, tc.want, w.broken)
		})
	}
}

// A restarted home adopts what its holder reported in its Reclaim answer:
// no less is safe (D5). A home the delegation was handed over to may renew
// it after the holder answered; that home keeps its own record of the
// renewal, which the restarted home's adoption does not replace (seeds
// 350,550 and 786,448 of the simulator: the first case).
func TestAdoptionAfterAnotherHomeRenewed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		renewed   bool          // t, which took it over, renews it after the answer
		remaining time.Duration // what the answer reports
		want      []string
	}{
		{"renewed elsewhere after the answer", true, 485 * time.Millisecond, nil},
		{"reported too short", false, 100 * time.Millisecond, []string{InvHolderFirst}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "h", "a", "t")
			d := tok(t, "e1.i1.c1")
			req := msg.RequestID{Inc: 1, Seq: 1}
			acq := env("a", "h", msg.Acquire{Key: "k", Req: req, Attempt: 1, Lease: lease})
			w.step(1, nil, []msg.Envelope{acq})
			grant := env("h", "a", msg.Grant{Key: "k", Req: req, Attempt: 1, Token: d, Lease: lease})
			w.step(0, []msg.Envelope{acq}, []msg.Envelope{grant})
			w.at(time.Millisecond)
			w.step(1, []msg.Envelope{grant}, nil)
			w.at(500 * time.Millisecond)
			renew := env("a", "t", msg.Renew{Key: "k", Token: d, Attempt: 1, Lease: lease})
			w.step(1, nil, []msg.Envelope{renew})
			w.at(505 * time.Millisecond)
			answer := env("a", "h", msg.ReclaimAnswer{ForInc: 1, Held: []msg.HeldDelegation{{Key: "k", Token: d, Remaining: tc.remaining}}})
			w.step(1, []msg.Envelope{env("h", "a", msg.Reclaim{})}, []msg.Envelope{answer})
			if tc.renewed {
				reply := env("t", "a", msg.RenewReply{Key: "k", Token: d, Attempt: 1, OK: true, Lease: lease})
				w.step(2, []msg.Envelope{renew}, []msg.Envelope{reply})
				w.at(510 * time.Millisecond)
				w.step(1, []msg.Envelope{reply}, nil)
			}
			w.at(600 * time.Millisecond)
			w.step(0, []msg.Envelope{answer}, nil)
			require.Equal(t, tc.want, w.broken)
		})
	}
}
