package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/msg"
)

const (
	mDownAfter = 2 * time.Second
	mJoinEvery = time.Second
)

var (
	m1 = msg.Member{ID: "n1", Store: 11, Addr: "g1", Version: 1}
	m2 = msg.Member{ID: "n2", Store: 22, Addr: "g2", Version: 1}
	m3 = msg.Member{ID: "n3", Store: 33, Addr: "g3", Version: 1}
)

// memberNode is self restored with epoch 5 of members, as after a restart.
func memberNode(self msg.Member, rejoinAfter time.Time, members ...msg.Member) *Node {
	e := msg.Epoch{Number: 5, Members: slices.Clone(members), Caps: msg.Caps{Ring: msg.RingV1}}
	msg.SortMembers(e.Members)
	cfg := Config{
		Self: self, Inc: 2,
		Epoch: epoch.Config{EpochLease: hEpochLease, MaxDrift: hDrift, RetryInterval: hRetry, PromiseTimeout: hPromise},
		Home:  home.Config{EpochLease: hEpochLease, Skew: hSkew, MaxLease: hLease, MinUseful: hMinUseful, RetryInterval: hRetry},
		Holder: delegation.Config{
			MaxDrift: hDrift, MinUseful: hMinUseful, RetryInterval: hRetry, Lease: hLease,
		},
		Members: MembersConfig{
			DownAfter: mDownAfter, JoinEvery: mJoinEvery, RejoinAfter: rejoinAfter,
			GossipRetry: time.Second, GossipRetryMax: 4 * time.Second, Seeds: []string{"seed:1"},
		},
	}
	return New(cfg, hBase, epoch.State{Learned: &epoch.Learned{Epoch: e}}, false)
}

func peer(m msg.Member, st Liveness) GossipPeer {
	return GossipPeer{Member: m, Gossip: "gossip-" + string(m.ID), State: st}
}

func self(m msg.Member) GossipPeer {
	p := peer(m, PeerAlive)
	p.Local = true
	return p
}

// removals runs Maintain every 100ms from hBase+from for d with view and
// returns the members proposed for removal and the Prepares sent.
func removals(n *Node, from, d time.Duration, view []GossipPeer) (proposed []msg.NodeID, prepares int) {
	for t := from; t <= from+d; t += 100 * time.Millisecond {
		now := hBase.Add(t)
		n.Gossip(now, view)
		rd := n.Maintain(now)
		for _, m := range rd.ProposedRemove {
			proposed = append(proposed, m.ID)
		}
		for _, o := range rd.Msgs {
			if o.Env.Body.Kind() == msg.KindPrepare {
				prepares++
			}
		}
	}
	return proposed, prepares
}

func TestDetectDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		view []GossipPeer
		d    time.Duration
		want []msg.NodeID
	}{
		{"heard no gossip since start: the others are absent, not down", []GossipPeer{self(m1)}, 10 * time.Second, nil},
		{"minority view: n2 and n3 dead", []GossipPeer{self(m1), peer(m2, PeerDead), peer(m3, PeerDead)}, 10 * time.Second, nil},
		{"majority view, n3 dead for DownAfter", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}, mDownAfter + 200*time.Millisecond, []msg.NodeID{"n3"}},
		{"majority view, n3 absent for DownAfter", []GossipPeer{self(m1), peer(m2, PeerAlive)}, mDownAfter + 200*time.Millisecond, []msg.NodeID{"n3"}},
		{"majority view, n3 dead for less than DownAfter", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}, mDownAfter - 200*time.Millisecond, nil},
		{"suspect is not down", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerSuspect)}, 10 * time.Second, nil},
		{"another store under n3's ID does not keep n3 up", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(msg.Member{ID: "n3", Store: 99}, PeerAlive)}, mDownAfter + 200*time.Millisecond, []msg.NodeID{"n3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := memberNode(m1, time.Time{}, m1, m2, m3)
			got, _ := removals(n, 0, tc.d, tc.view)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("proposed removals %v, want %v (once each)", got, tc.want)
			}
		})
	}
}

// The DownAfter clock restarts when the live majority is lost, and a member
// that comes back before its removal is agreed has the wish withdrawn.
func TestDetectDownClockAndWithdraw(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	majority := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}
	minority := []GossipPeer{self(m1), peer(m2, PeerDead), peer(m3, PeerDead)}
	if got, _ := removals(n, 0, time.Second, majority); got != nil {
		t.Fatalf("proposed %v within DownAfter", got)
	}
	if got, _ := removals(n, 1100*time.Millisecond, time.Second, minority); got != nil {
		t.Fatalf("proposed %v without a live majority", got)
	}
	// The clock starts again: DownAfter more of a majority view.
	if got, _ := removals(n, 2200*time.Millisecond, mDownAfter-300*time.Millisecond, majority); got != nil {
		t.Fatalf("proposed %v before DownAfter of a majority view", got)
	}
	got, prepares := removals(n, 2200*time.Millisecond+mDownAfter, 300*time.Millisecond, majority)
	if !slices.Equal(got, []msg.NodeID{"n3"}) || prepares == 0 {
		t.Fatalf("proposed %v with %d prepares, want n3 once", got, prepares)
	}
	all := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)}
	removals(n, 5*time.Second, 100*time.Millisecond, all)
	if n.Withdrawn() != 1 {
		t.Fatalf("withdrawn %d, want 1: n3 came back before its removal was agreed", n.Withdrawn())
	}
}

func TestDuplicateJoin(t *testing.T) {
	impostor := msg.Member{ID: "n3", Store: 77, Addr: "elsewhere", Version: 1}
	for _, tc := range []struct {
		name    string
		view    []GossipPeer
		refused bool
	}{
		{"old store alive", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)}, true},
		{"old store suspect", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerSuspect)}, true},
		{"old store dead (a wiped disk, H21)", []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}, false},
		{"old store absent", []GossipPeer{self(m1), peer(m2, PeerAlive)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := memberNode(m1, time.Time{}, m1, m2, m3)
			n.Gossip(hBase, tc.view)
			rd := n.Receive(hBase, msg.Envelope{From: impostor, FromInc: 1, To: "n1", Version: 1, Body: msg.Join{Member: impostor}})
			refusals, prepares := 0, 0
			for _, o := range rd.Msgs {
				switch b := o.Env.Body.(type) {
				case msg.Refused:
					if b.Reason == msg.RefusedDuplicateID && o.To == impostor {
						refusals++
					}
				case msg.Prepare:
					prepares++
				}
			}
			if tc.refused != (refusals == 1) || tc.refused == (prepares > 0) {
				t.Fatalf("refusals %d, prepares %d; want refused=%v", refusals, prepares, tc.refused)
			}
			if got, _ := n.Book("n3"); tc.refused && got != m3 {
				t.Fatalf("the impostor's address replaced the member's: %+v", got)
			}
		})
	}
}

// The impostor's side: a refusal stops its joins and says why.
func TestDuplicateRefusalStopsJoining(t *testing.T) {
	imp := msg.Member{ID: "n1", Store: 99, Addr: "x", Version: 1}
	n := memberNode(imp, time.Time{}, m1, m2, m3) // its epoch holds n1 with another store
	n.WantJoin()
	n.Gossip(hBase, []GossipPeer{self(imp), peer(m2, PeerAlive)})
	rd := n.Maintain(hBase)
	if !slices.ContainsFunc(rd.Msgs, func(o Outgoing) bool { return o.Env.Body.Kind() == msg.KindJoin }) {
		t.Fatalf("no Join sent: %+v", rd.Msgs)
	}
	rd = n.Receive(hBase, msg.Envelope{From: m2, FromInc: 1, To: "n1", Version: 1, Epoch: 5, Body: msg.Refused{Reason: msg.RefusedDuplicateID}})
	if !rd.Duplicate || n.Duplicate() == "" || n.Phase(hBase) != PhaseDuplicate {
		t.Fatalf("refusal not taken: ready %v, duplicate %q, phase %v", rd.Duplicate, n.Duplicate(), n.Phase(hBase))
	}
	rd = n.Maintain(hBase.Add(10 * time.Second))
	if slices.ContainsFunc(rd.Msgs, func(o Outgoing) bool { return o.Env.Body.Kind() == msg.KindJoin }) {
		t.Fatal("still asking to join after the refusal")
	}
}

// Gossip rejoins: every epoch member that does not look alive, with
// doubling backoff up to the cap; seeds while no other member looks alive.
func TestGossipJoins(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)})
	n.Maintain(hBase) // learns their gossip addresses
	view := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}
	var at []time.Duration
	for d := time.Duration(0); d <= 20*time.Second; d += 100 * time.Millisecond {
		now := hBase.Add(d)
		n.Gossip(now, view)
		for _, a := range n.Maintain(now).GossipJoin {
			if a != "gossip-n3" {
				t.Fatalf("joined %s at %v; only n3 looks down", a, d)
			}
			at = append(at, d)
		}
	}
	want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second, 15 * time.Second, 19 * time.Second}
	if !slices.Equal(at, want) {
		t.Fatalf("gossip joins to n3 at %v, want %v", at, want)
	}

	// A restarted node that sees nobody: the kept addresses and the seeds.
	r := memberNode(m1, time.Time{}, m1, m2, m3)
	r.mem.gossipAddr["n2"], r.mem.gossipAddr["n3"] = "kept-n2", "kept-n3"
	r.Gossip(hBase, []GossipPeer{self(m1)})
	rd := r.Maintain(hBase)
	slices.Sort(rd.GossipJoin)
	if !slices.Equal(rd.GossipJoin, []string{"kept-n2", "kept-n3", "seed:1"}) {
		t.Fatalf("restarted node joins %v", rd.GossipJoin)
	}

	// The same node, with a joiner that came in through it alive in its
	// view and no member: the seeds still (the kept addresses may all be
	// stale), or the two are an island that never meets the cluster.
	j := memberNode(m1, time.Time{}, m1, m2, m3)
	j.mem.gossipAddr["n2"], j.mem.gossipAddr["n3"] = "kept-n2", "kept-n3"
	j.Gossip(hBase, []GossipPeer{self(m1), peer(msg.Member{ID: "n4", Store: 44, Addr: "g4", Version: 1}, PeerAlive)})
	rd = j.Maintain(hBase)
	slices.Sort(rd.GossipJoin)
	if !slices.Equal(rd.GossipJoin, []string{"kept-n2", "kept-n3", "seed:1"}) {
		t.Fatalf("restarted node beside a joiner joins %v", rd.GossipJoin)
	}
}

func TestJoinPacingAndPhase(t *testing.T) {
	gate := hBase.Add(4 * time.Second)
	// n3 restarted, and the epoch it kept has it with another address.
	n := memberNode(m3, gate, m1, m2, msg.Member{ID: "n3", Store: 33, Addr: "old", Version: 1})
	n.Gossip(hBase, []GossipPeer{self(m3), peer(m1, PeerAlive), peer(m2, PeerDead)})
	if rd := n.Maintain(hBase); !hasKind(rd, msg.KindJoin) {
		t.Fatal("a node that only needs its entry updated (another address) waited for its restart gate")
	}
	// Removed: it waits for its restart gate, then asks a live member only.
	n = memberNode(m3, gate, m1, m2)
	view := []GossipPeer{self(m3), peer(m1, PeerAlive), peer(m2, PeerDead)}
	n.Gossip(hBase, view)
	if rd := n.Maintain(hBase); hasKind(rd, msg.KindJoin) {
		t.Fatal("asked to join inside the restart gate")
	}
	if d := n.PhaseDetail(hBase.Add(time.Second)); d != "restart gate: 3.0s left before asking to join" {
		t.Fatalf("phase %q", d)
	}
	if ok, why := n.Lockable(hBase); ok || !strings.Contains(why, "restart gate") {
		t.Fatalf("lockable %v %q", ok, why)
	}
	var joins []msg.NodeID
	for d := 4 * time.Second; d < 7*time.Second; d += 100 * time.Millisecond {
		n.Gossip(hBase.Add(d), view)
		for _, o := range n.Maintain(hBase.Add(d)).Msgs {
			if o.Env.Body.Kind() == msg.KindJoin {
				joins = append(joins, o.To.ID)
			}
		}
	}
	if !slices.Equal(joins, []msg.NodeID{"n1", "n1", "n1"}) {
		t.Fatalf("joins sent to %v, want n1 once per JoinEvery", joins)
	}
	if d := n.PhaseDetail(hBase.Add(7 * time.Second)); d != "joining: asked n1" {
		t.Fatalf("phase %q", d)
	}
}

func TestBootstrapWaitsForGossip(t *testing.T) {
	cfg := memberNode(m1, time.Time{}).cfg
	n := New(cfg, hBase, epoch.State{}, false)
	n.StartBootstrap([]msg.NodeID{"n1", "n2", "n3"})
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive)})
	rd := n.Maintain(hBase)
	if d := n.PhaseDetail(hBase); d != "bootstrapping: waiting for n3 in gossip" {
		t.Fatalf("phase %q", d)
	}
	if !slices.Contains(rd.GossipJoin, "seed:1") || hasKind(rd, msg.KindPrepare) {
		t.Fatalf("want seeds joined and no proposal: %+v", rd)
	}
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)})
	rd = n.Maintain(hBase.Add(time.Second))
	if !hasKind(rd, msg.KindPrepare) {
		rd = n.Tick(hBase.Add(time.Second)) // a step learns one epoch: 0 here, the proposal next
	}
	if !hasKind(rd, msg.KindPrepare) {
		t.Fatal("the lowest ID did not propose epoch 1 once every initial member was in gossip")
	}
}

func TestHandOffBlocker(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerSuspect)})
	if why := n.HandOffBlocker(); !strings.Contains(why, "member n3 of epoch 5 does not look alive") {
		t.Fatalf("blocker %q", why)
	}
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)})
	if why := n.HandOffBlocker(); why != "" {
		t.Fatalf("blocker %q", why)
	}
	if why := memberNode(m1, time.Time{}, m1).HandOffBlocker(); why != "the only member of epoch 5" {
		t.Fatalf("blocker %q", why)
	}
}

func hasKind(rd Ready, k msg.Kind) bool {
	return slices.ContainsFunc(rd.Msgs, func(o Outgoing) bool { return o.Env.Body.Kind() == k })
}

// leavesIn lists the members n's Ready asks to leave.
func leavesIn(rd Ready) []msg.NodeID {
	var to []msg.NodeID
	for _, o := range rd.Msgs {
		if o.Env.Body.Kind() == msg.KindLeave {
			to = append(to, o.To.ID)
		}
	}
	slices.Sort(to)
	return to
}

// A Leave that is lost is asked again by Maintain, paced as joins are,
// until an epoch without the leaver is learned; then never again. The root
// package used to resend it from its own ticker, which the simulator did
// not run.
func TestLeaveAskedAgainUntilLearned(t *testing.T) {
	n1 := memberNode(m1, time.Time{}, m1, m2, m3)
	n2 := memberNode(m2, time.Time{}, m1, m2, m3)
	n3 := memberNode(m3, time.Time{}, m1, m2, m3)
	nodes := map[msg.NodeID]*Node{"n1": n1, "n2": n2, "n3": n3}
	view := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)}

	if got := leavesIn(n1.Leave(hBase, false)); !slices.Equal(got, []msg.NodeID{"n2", "n3"}) {
		t.Fatalf("Leave asked %v, want n2 and n3", got) // and both are lost
	}
	maintain := func(now time.Time) Ready {
		n1.Gossip(now, view)
		return n1.Maintain(now)
	}
	if got := leavesIn(maintain(hBase.Add(mJoinEvery / 2))); len(got) > 0 {
		t.Fatalf("asked %v again before JoinEvery", got)
	}
	rd := maintain(hBase.Add(mJoinEvery))
	if got := leavesIn(rd); !slices.Equal(got, []msg.NodeID{"n2", "n3"}) {
		t.Fatalf("after JoinEvery asked %v, want n2 and n3", got)
	}
	now, _ := deliverAll(t, nodes, hBase.Add(mJoinEvery), rd.Msgs)
	if l, ok := n1.Current(); !ok || l.Epoch.Has(m1) || n1.LeftAt().IsZero() {
		t.Fatalf("n1 learned epoch %d (%v) and left at %v: the second ask did not land", l.Epoch.Number, l.Epoch.Members, n1.LeftAt())
	}
	for d := mJoinEvery; d <= 5*mJoinEvery; d += mJoinEvery / 2 {
		if got := leavesIn(maintain(now.Add(d))); len(got) > 0 {
			t.Fatalf("asked %v again after leaving", got)
		}
	}

	// WantJoin takes the Leave back: nothing more is asked.
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	n.Leave(hBase, false)
	n.WantJoin()
	n.Gossip(hBase.Add(mJoinEvery), view)
	if got := leavesIn(n.Maintain(hBase.Add(mJoinEvery))); len(got) > 0 {
		t.Fatalf("asked %v to leave after WantJoin", got)
	}
	// Leaving alone (Close's check before its handoff) asks nothing.
	n = memberNode(m1, time.Time{}, m1, m2, m3)
	n.Leaving()
	n.Gossip(hBase.Add(mJoinEvery), view)
	if got := leavesIn(n.Maintain(hBase.Add(mJoinEvery))); len(got) > 0 {
		t.Fatalf("Leaving alone asked %v to leave", got)
	}
}

// Close's Leave (guarded) asks nothing, first or again, while a member does
// not look alive: the ask could leave an epoch whose majority is not alive.
// A Leave the user called asks regardless, as it did.
func TestGuardedLeave(t *testing.T) {
	alive := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)}
	n3Dead := []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerDead)}
	for _, tc := range []struct {
		name    string
		guarded bool
		// views at the Leave, and at each Maintain one JoinEvery apart
		views [][]GossipPeer
		want  []int // Leaves sent at the Leave and at each Maintain
	}{
		{"all alive", true, [][]GossipPeer{alive, alive, alive}, []int{2, 2, 2}},
		{"down before the first ask", true, [][]GossipPeer{n3Dead, n3Dead, alive}, []int{0, 0, 2}},
		{"down before an ask again", true, [][]GossipPeer{alive, n3Dead, alive}, []int{2, 0, 2}},
		{"the user's Leave", false, [][]GossipPeer{n3Dead, n3Dead, alive}, []int{2, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := memberNode(m1, time.Time{}, m1, m2, m3)
			var got []int
			for i, v := range tc.views {
				now := hBase.Add(time.Duration(i) * mJoinEvery)
				n.Gossip(now, v)
				if i == 0 {
					got = append(got, len(leavesIn(n.Leave(now, tc.guarded))))
					continue
				}
				got = append(got, len(leavesIn(n.Maintain(now))))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Leaves sent %v, want %v", got, tc.want)
			}
		})
	}
}

// A peer that advertises other safety timings fails cluster locks closed
// on this node until it advertises this node's (or none: an earlier release
// advertises nothing), or has been dead in gossip for its own EpochLease +
// Skew. The reason names the peer and both timings.
func TestTimingsMismatchFailsLocksClosed(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	own := n.cfg.Timings()
	longer := own
	longer.EpochLease += 3 * time.Second
	drift := own
	drift.MaxDrift *= 2
	with := func(p GossipPeer, tm msg.Timings) GossipPeer { p.Timings = tm; return p }
	deadSince := func(m msg.Member, at time.Duration) GossipPeer {
		p := peer(m, PeerDead)
		p.Since = hBase.Add(at)
		return p
	}
	for _, tc := range []struct {
		name string
		view []GossipPeer
		want []string // in the reason; none: lockable
	}{
		{"same timings", []GossipPeer{with(self(m1), own), with(peer(m2, PeerAlive), own), with(peer(m3, PeerAlive), own)}, nil},
		{"one advertises none", []GossipPeer{with(self(m1), own), peer(m2, PeerAlive), with(peer(m3, PeerAlive), own)}, nil},
		{"a longer epoch lease", []GossipPeer{with(self(m1), own), with(peer(m2, PeerAlive), longer), with(peer(m3, PeerAlive), own)},
			[]string{"this node runs " + own.String(), "n2 runs " + longer.String(), "Changing timings"}},
		{"a dead peer's other drift, and a suspect's lease", []GossipPeer{with(deadSince(m3, 8*time.Second), drift), with(self(m1), own), with(peer(m2, PeerSuspect), longer)},
			[]string{"n2 runs " + longer.String() + "; n3 runs " + drift.String()}},
		{"a peer dead for longer than its EpochLease and Skew", []GossipPeer{with(self(m1), own), with(peer(m2, PeerAlive), own), with(deadSince(m3, 10*time.Second-own.EpochLease-own.Skew), drift)}, nil},
		{"agreeing again", []GossipPeer{with(self(m1), own), with(peer(m2, PeerAlive), own), with(peer(m3, PeerAlive), own)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := hBase.Add(10 * time.Second) // past the restart gate
			n.Gossip(now, tc.view)
			n.Maintain(now)
			rd := n.Lock(now, "k", 7, now.Add(time.Second), 0, 0)
			ok, why := n.Lockable(now)
			if tc.want == nil {
				if !ok || n.Mixed() != "" {
					t.Fatalf("not lockable: %q (mixed %q)", why, n.Mixed())
				}
				return
			}
			if ok {
				t.Fatal("lockable with a peer of other timings")
			}
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Fatalf("reason %q does not say %q", why, w)
				}
			}
			failed := false
			for _, ev := range rd.Events {
				failed = failed || (ev.Kind == delegation.Failed && ev.Locker == 7 && ev.Reason == delegation.ReasonUnavailable && ev.Detail == why)
			}
			if !failed {
				t.Fatalf("Lock while mixed: events %+v, want it failed as unavailable with %q", rd.Events, why)
			}
		})
	}
}

// A reclaim raises the incarnation below which a member's messages are
// dropped, for that member's store only: a wiped directory under the same
// node ID counts from 1 again and is heard, while the old store's older
// incarnations stay dropped.
func TestOlderIncarnationsDroppedPerStore(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	now := hBase.Add(10 * time.Second)
	wiped := m3
	wiped.Store = 99
	answered := func(from msg.Member, inc uint64) bool {
		rd := n.Receive(now, msg.Envelope{From: from, FromInc: inc, To: m1.ID, Body: msg.EpochQuery{}})
		for _, o := range rd.Msgs {
			if o.To.ID == from.ID && o.Env.Body.Kind() == msg.KindLearn {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name string
		from msg.Member
		inc  uint64
		want bool
	}{
		{"before any reclaim", m3, 1, true},
		{"reclaim at 4", m3, 4, true},
		{"the old store's incarnation 3", m3, 3, false},
		{"the old store's incarnation 4", m3, 4, true},
		{"the wiped store's incarnation 1", wiped, 1, true},
	} {
		if tc.name == "reclaim at 4" {
			n.Receive(now, msg.Envelope{From: m3, FromInc: 4, To: m1.ID, Body: msg.Reclaim{}})
		}
		if got := answered(tc.from, tc.inc); got != tc.want {
			t.Fatalf("%s: an EpochQuery from %s store %d i%d answered %v, want %v", tc.name, tc.from.ID, tc.from.Store, tc.inc, got, tc.want)
		}
	}
}

// H28 from both sides. A member of the current epoch that keeps asking to
// join it has not learned it: after unansweredAfter of asks it is reported
// unreached, and no longer once it stops asking; so is a removed member
// whose Joins are stale. A joiner that has heard nothing back for
// unansweredAfter says so in its phase.
func TestUnreachedJoiner(t *testing.T) {
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	join := func(at time.Duration, who msg.Member) {
		n.Receive(hBase.Add(at), msg.Envelope{From: who, FromInc: 1, To: m1.ID, Epoch: 5, Body: msg.Join{Member: who}})
	}
	m4 := msg.Member{ID: "n4", Store: 44, Addr: "g4", Version: 1}
	for at := time.Duration(0); at <= 12*time.Second; at += mJoinEvery {
		join(at, m3) // a member, as the epoch has it
		join(at, m4) // not a member: an ordinary joiner
		got := n.Unreached(hBase.Add(at))
		want := at >= unansweredAfter
		if (len(got) == 1 && got[0] == m3) != want || len(got) > 1 {
			t.Fatalf("after %v of asks: unreached %v, want n3: %v", at, got, want)
		}
	}
	if got := n.Unreached(hBase.Add(12*time.Second + unansweredAfter + mJoinEvery)); len(got) != 0 {
		t.Fatalf("n3 stopped asking, still unreached: %v", got)
	}

	// n4 was let in (epoch 5) and removed (epoch 6) before it learned
	// either: its Joins, sent in no epoch, are stale, answered with the
	// epoch alone, and it is as unreached as a member. The same Join sent
	// in epoch 6 (n4 caught up) is an ordinary join.
	prev := msg.Epoch{Number: 5, Members: []msg.Member{m1, m2, m3, m4}, Caps: msg.Caps{Ring: msg.RingV1}}
	cur := msg.Epoch{Number: 6, Members: []msg.Member{m1, m2, m3}, Caps: msg.Caps{Ring: msg.RingV1}}
	removed := func() *Node {
		return New(n.cfg, hBase, epoch.State{Learned: &epoch.Learned{Epoch: cur, Cert: msg.Certificate{Prev: prev}}}, false)
	}
	r := removed()
	for at := time.Duration(0); at <= 12*time.Second; at += mJoinEvery {
		now := hBase.Add(at)
		r.Receive(now, msg.Envelope{From: m4, FromInc: 1, To: m1.ID, Epoch: 0, Body: msg.Join{Member: m4}})
		got := r.Unreached(now)
		want := at >= unansweredAfter
		if (len(got) == 1 && got[0] == m4) != want || len(got) > 1 {
			t.Fatalf("after %v of stale asks: unreached %v, want n4: %v", at, got, want)
		}
	}
	c := removed()
	for at := time.Duration(0); at <= 12*time.Second; at += mJoinEvery {
		c.Receive(hBase.Add(at), msg.Envelope{From: m4, FromInc: 1, To: m1.ID, Epoch: 6, Body: msg.Join{Member: m4}})
	}
	if got := c.Unreached(hBase.Add(12 * time.Second)); len(got) != 0 {
		t.Fatalf("a joiner that learned the epoch without it: unreached %v", got)
	}

	j := New(memberNode(m4, time.Time{}).cfg, hBase, epoch.State{}, false)
	j.WantJoin()
	view := []GossipPeer{self(m4), peer(m1, PeerAlive)}
	for d := time.Duration(0); d <= 11*time.Second; d += 100 * time.Millisecond {
		j.Gossip(hBase.Add(d), view)
		j.Maintain(hBase.Add(d))
	}
	if d := j.PhaseDetail(hBase.Add(5 * time.Second)); d != "joining: asked n1" {
		t.Fatalf("after 5s: phase %q", d)
	}
	if d := j.PhaseDetail(hBase.Add(11 * time.Second)); !strings.Contains(d, "no answer from any node for 11s: can they reach this node at g4?") {
		t.Fatalf("after 11s unanswered: phase %q", d)
	}
	j.Receive(hBase.Add(11*time.Second), msg.Envelope{From: m1, FromInc: 1, To: m4.ID, Body: msg.EpochQuery{}})
	if d := j.PhaseDetail(hBase.Add(11 * time.Second)); d != "joining: asked n1" {
		t.Fatalf("answered: phase %q", d)
	}
}

// H28: a Join that would put a node into the epoch waits until its
// advertised address has been shown to reach it (Config.Reaches). Until
// then no epoch is proposed, the joiner is sent the epoch (which is what
// shows its address), and the held ask counts toward Unreached. A Join the
// epoch already answers is not held, an address shown later lets the held
// Join through at the next Maintain, and a held Join older than JoinEvery
// is forgotten (the joiner asks again).
func TestUnprovenJoinWaits(t *testing.T) {
	m4 := msg.Member{ID: "n4", Store: 44, Addr: "g4", Version: 1}
	setup := func() (*Node, map[msg.NodeID]bool) {
		n := memberNode(m1, time.Time{}, m1, m2, m3)
		shown := map[msg.NodeID]bool{}
		n.cfg.Reaches = func(m msg.Member) bool {
			if m.ID != m4.ID {
				t.Fatalf("Reaches asked about %s, whose Join the epoch answers", m.ID)
			}
			return shown[m.ID]
		}
		return n, shown
	}
	join := func(n *Node, at time.Duration, who msg.Member) Ready {
		return n.Receive(hBase.Add(at), msg.Envelope{From: who, FromInc: 1, To: m1.ID, Epoch: 0, Body: msg.Join{Member: who}})
	}
	learnTo := func(rd Ready, id msg.NodeID) bool {
		return slices.ContainsFunc(rd.Msgs, func(o Outgoing) bool { return o.To.ID == id && o.Env.Body.Kind() == msg.KindLearn })
	}

	n, shown := setup()
	rd := join(n, 0, m4)
	if hasKind(rd, msg.KindPrepare) || !learnTo(rd, "n4") {
		t.Fatalf("an unproven Join: want the epoch sent to n4 and nothing proposed, got %v", rd.Msgs)
	}
	if hasKind(join(n, 0, m3), msg.KindPrepare) {
		t.Fatal("a member's Join proposed an epoch")
	}
	if rd := n.Maintain(hBase.Add(100 * time.Millisecond)); hasKind(rd, msg.KindPrepare) {
		t.Fatal("proposed while n4's address is not shown")
	}
	shown["n4"] = true
	if rd := n.Maintain(hBase.Add(200 * time.Millisecond)); !hasKind(rd, msg.KindPrepare) {
		t.Fatalf("n4's address shown: the held Join was not proposed: %v", rd.Msgs)
	}

	// Shown after the held Join is older than JoinEvery: forgotten, and
	// only the joiner's next ask goes through.
	n, shown = setup()
	join(n, 0, m4)
	n.Maintain(hBase.Add(mJoinEvery + time.Millisecond))
	shown["n4"] = true
	if rd := n.Maintain(hBase.Add(mJoinEvery + 2*time.Millisecond)); hasKind(rd, msg.KindPrepare) {
		t.Fatal("a held Join older than JoinEvery was proposed")
	}
	if rd := join(n, mJoinEvery+3*time.Millisecond, m4); !hasKind(rd, msg.KindPrepare) {
		t.Fatalf("a Join from a shown address was not proposed: %v", rd.Msgs)
	}

	// Never shown: asks held for unansweredAfter make n4 unreached, and no
	// epoch is ever proposed.
	n, _ = setup()
	for at := time.Duration(0); at <= 12*time.Second; at += mJoinEvery {
		if rd := join(n, at, m4); hasKind(rd, msg.KindPrepare) {
			t.Fatalf("proposed at %v", at)
		}
		if rd := n.Maintain(hBase.Add(at + 100*time.Millisecond)); hasKind(rd, msg.KindPrepare) {
			t.Fatalf("proposed at %v", at)
		}
		got := n.Unreached(hBase.Add(at))
		if want := at >= unansweredAfter; (len(got) == 1 && got[0] == m4) != want || len(got) > 1 {
			t.Fatalf("after %v of held asks: unreached %v, want n4: %v", at, got, want)
		}
	}
}

// H28 at the first start: the initial members form epoch 0 only once each
// one's address has answered as it (Config.Reaches). Until then every such
// member is asked for its epoch (which opens the stream that shows its
// address), nothing is proposed, and the phase names the addresses.
func TestBootstrapWaitsForAddresses(t *testing.T) {
	cfg := memberNode(m1, time.Time{}).cfg
	shown := map[msg.NodeID]bool{"n2": true}
	cfg.Reaches = func(m msg.Member) bool { return shown[m.ID] }
	n := New(cfg, hBase, epoch.State{}, false)
	n.StartBootstrap([]msg.NodeID{"n1", "n2", "n3"})
	n.Gossip(hBase, []GossipPeer{self(m1), peer(m2, PeerAlive), peer(m3, PeerAlive)})
	for d := time.Duration(0); d < time.Second; d += 100 * time.Millisecond {
		// Msgs is good until the next input: look before the Tick.
		rd := n.Maintain(hBase.Add(d))
		if hasKind(rd, msg.KindPrepare) {
			t.Fatalf("proposed at %v while n3's address is not shown", d)
		}
		if d == 0 && !slices.ContainsFunc(rd.Msgs, func(o Outgoing) bool { return o.To.ID == "n3" && o.Env.Body.Kind() == msg.KindEpochQuery }) {
			t.Fatalf("n3 was not asked: %v", rd.Msgs)
		}
		if rd := n.Tick(hBase.Add(d)); hasKind(rd, msg.KindPrepare) {
			t.Fatalf("proposed at %v while n3's address is not shown", d)
		}
	}
	if _, ok := n.Current(); ok {
		t.Fatal("epoch 0 installed while n3's address is not shown")
	}
	if d, want := n.PhaseDetail(hBase.Add(time.Second)), "bootstrapping: waiting for an answer from n3 at g3"; d != want {
		t.Fatalf("phase %q, want %q", d, want)
	}
	want := "bootstrapping: waiting for an answer from n3 at g3, and for them to reach this node at g1 (check each one's --advertise-addr)"
	if d := n.PhaseDetail(hBase.Add(addressHintAfter)); d != want {
		t.Fatalf("phase %q, want %q", d, want)
	}
	shown["n3"] = true
	rd := n.Maintain(hBase.Add(time.Second))
	if !hasKind(rd, msg.KindPrepare) {
		rd = n.Tick(hBase.Add(time.Second))
	}
	if !hasKind(rd, msg.KindPrepare) {
		t.Fatal("the lowest ID did not propose epoch 1 once every initial member's address was shown")
	}
	if d := n.PhaseDetail(hBase.Add(time.Second)); d != "bootstrapping: agreeing on epoch 1" {
		t.Fatalf("phase %q", d)
	}
}
