package core

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// A member that restarts at another address (a new pod IP, a port chosen at
// start) asks to join again and keeps its keys. The epoch that records its
// new address must also be where the members send it messages from then on:
// the epoch before it, which still holds the old address, only fills in
// members the new epoch lacks. Otherwise the Learn of that very epoch goes
// to the old address, and the restarted node stays out of its own epoch
// until a later join retry happens to ask another member.
func TestNewEpochAddressWinsInTheBook(t *testing.T) {
	moved := m2
	moved.Addr = "g2-restarted"
	n1 := memberNode(m1, time.Time{}, m1, m2, m3)
	n3 := memberNode(m3, time.Time{}, m1, m2, m3)
	nodes := map[msg.NodeID]*Node{"n1": n1, "n3": n3}

	join := Outgoing{To: m1, Env: msg.Envelope{From: moved, FromInc: 3, To: "n1", Epoch: 5, Version: 1, Body: msg.Join{Member: moved}}}
	_, toMoved := deliverAll(t, nodes, hBase, []Outgoing{join})
	for id, n := range nodes {
		l, _, _ := n.EpochMachine().Current()
		if got, _ := l.Epoch.Member("n2"); got != moved {
			t.Fatalf("%s learned epoch %d with n2 as %+v, want %+v", id, l.Epoch.Number, got, moved)
		}
		if got, _ := n.Book("n2"); got.Addr != moved.Addr {
			t.Errorf("%s sends n2's messages to %q, the address of the epoch before", id, got.Addr)
		}
	}
	learns := 0
	for _, o := range toMoved {
		if _, ok := o.Env.Body.(msg.Learn); ok {
			learns++
			if o.To.Addr != moved.Addr {
				t.Errorf("the Learn of epoch %d went to %q, not to n2's new address", o.Env.Body.(msg.Learn).Epoch.Number, o.To.Addr)
			}
		}
	}
	if learns == 0 {
		t.Fatal("no Learn was sent to the restarted node")
	}
}

// A joiner asks a live member at the address that member's process
// advertises in gossip now, not at the one the epoch recorded before it
// moved: there nothing answers, and the member never hears the Join (the
// seed used to overwrite the book with its epoch entry).
func TestJoinSeedsAtTheirGossipAddress(t *testing.T) {
	moved := m2
	moved.Addr = "g2-restarted"
	// n3 restarted at another address too: it needs its own entry updated.
	me := m3
	me.Addr = "g3-restarted"
	n := memberNode(me, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(me), peer(m1, PeerDead), peer(moved, PeerAlive)})
	var to []msg.Member
	for _, o := range n.Maintain(hBase).Msgs {
		if o.Env.Body.Kind() == msg.KindJoin {
			to = append(to, o.To)
		}
	}
	if len(to) != 1 || to[0] != moved {
		t.Fatalf("Join sent to %+v, want n2 at its gossip address %q", to, moved.Addr)
	}
	if got, _ := n.Book("n2"); got != moved {
		t.Fatalf("the book has n2 as %+v after the Join, want %+v", got, moved)
	}
}

// The only member of its epoch restarts at another address. Nobody else
// can propose its new entry, so it proposes it itself and learns it: before,
// it asked the non-members gossip knew (or nobody) for ever and stayed
// unavailable ("not a member of epoch 5 as it runs now").
func TestSoleMemberProposesItsOwnNewEntry(t *testing.T) {
	me := m1
	me.Addr = "g1-restarted"
	n := memberNode(me, time.Time{}, m1)
	if !n.NeedsJoin() {
		t.Fatal("the restarted member does not see its entry as stale")
	}
	for d := time.Duration(0); d < 3*time.Second && n.NeedsJoin(); d += 100 * time.Millisecond {
		now := hBase.Add(d)
		n.Gossip(now, []GossipPeer{self(me)})
		rd := n.Maintain(now)
		for _, o := range rd.Msgs {
			t.Fatalf("sent %v to %s: a one-member epoch needs nobody", o.Env.Body.Kind(), o.To.ID)
		}
		n.Tick(now)
	}
	l, _, _ := n.EpochMachine().Current()
	if got, _ := l.Epoch.Member("n1"); l.Epoch.Number != 6 || got != me {
		t.Fatalf("learned epoch %d with n1 as %+v, want epoch 6 with %+v", l.Epoch.Number, got, me)
	}
	if ok, why := n.Lockable(hBase.Add(3 * time.Second)); !ok {
		t.Fatalf("not lockable after its entry was updated: %s", why)
	}
}

// With other members, a stale member that sees none of them alive proposes
// its entry itself, and says so; it cannot be learned without a majority.
func TestStaleMemberAloneProposes(t *testing.T) {
	me := m1
	me.Addr = "g1-restarted"
	n := memberNode(me, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(me), peer(m2, PeerDead)})
	prepares := 0
	for _, o := range n.Maintain(hBase).Msgs {
		if o.Env.Body.Kind() == msg.KindPrepare {
			prepares++
		}
	}
	if prepares != 2 {
		t.Fatalf("%d Prepares sent, want one to each other member", prepares)
	}
	if d := n.PhaseDetail(hBase); d != "joining: no other member alive in gossip; proposing its own new entry" {
		t.Fatalf("phase %q", d)
	}
	// A member alive in gossip is asked instead.
	n = memberNode(me, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(me), peer(m2, PeerAlive)})
	if rd := n.Maintain(hBase); !hasKind(rd, msg.KindJoin) || hasKind(rd, msg.KindPrepare) {
		t.Fatal("a stale member proposed its own entry although n2 was alive to ask")
	}
	if d := n.PhaseDetail(hBase); d != "joining: asked n2" {
		t.Fatalf("phase %q", d)
	}
}

// A message from the process before a restart at another address, delayed
// past the restart, does not send the book back to the old address.
func TestOldIncarnationDoesNotMoveTheBookBack(t *testing.T) {
	moved := m2
	moved.Addr = "g2-restarted"
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	hello := func(from msg.Member, inc uint64) {
		n.Receive(hBase, msg.Envelope{From: from, FromInc: inc, To: "n1", Epoch: 5, Version: 1, Body: msg.EpochQuery{}})
	}
	hello(moved, 4)
	if got, _ := n.Book("n2"); got != moved {
		t.Fatalf("book has n2 as %+v after its new process spoke", got)
	}
	hello(m2, 3) // the old process's, late
	if got, _ := n.Book("n2"); got != moved {
		t.Fatalf("a late message of incarnation 3 moved n2 back to %q", got.Addr)
	}
	hello(m2, 5) // it moved back
	if got, _ := n.Book("n2"); got != m2 {
		t.Fatalf("book has n2 as %+v after incarnation 5 spoke from %q", got, m2.Addr)
	}
}

// A node restored on an old epoch reaches a member that moved since at the
// address gossip advertises: its renewals, and so the answers that tell it
// of newer epochs, go there. An impostor's advertisement (a live member's
// node ID with another store) does not redirect the member's messages.
func TestBookFollowsGossip(t *testing.T) {
	moved := m2
	moved.Addr = "g2-restarted"
	impostor := msg.Member{ID: "n3", Store: 77, Addr: "elsewhere", Version: 1}
	n := memberNode(m1, time.Time{}, m1, m2, m3)
	n.Gossip(hBase, []GossipPeer{self(m1), peer(moved, PeerAlive), peer(m3, PeerAlive), peer(impostor, PeerAlive)})
	if got, _ := n.Book("n2"); got != moved {
		t.Fatalf("book has n2 as %+v, gossip says %q", got, moved.Addr)
	}
	if got, _ := n.Book("n3"); got != m3 {
		t.Fatalf("an impostor's gossip entry took n3's place: %+v", got)
	}
	sent := false
	for d := time.Duration(0); d < 2*hEpochLease && !sent; d += 50 * time.Millisecond {
		for _, o := range n.Tick(hBase.Add(d)).Msgs {
			if o.To.ID == "n2" {
				sent = true
				if o.To != moved {
					t.Fatalf("%v sent to n2 at %q, not where it runs", o.Env.Body.Kind(), o.To.Addr)
				}
			}
		}
	}
	if !sent {
		t.Fatal("nothing was sent to n2")
	}
}

// deliverAll delivers queue and everything it leads to among nodes, a
// millisecond a message from now, until they go quiet. It returns the last
// instant and what was sent to nodes not in the map.
func deliverAll(t *testing.T, nodes map[msg.NodeID]*Node, now time.Time, queue []Outgoing) (time.Time, []Outgoing) {
	t.Helper()
	var elsewhere []Outgoing
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 1000 {
			t.Fatal("the members never went quiet")
		}
		o := queue[0]
		queue = queue[1:]
		now = now.Add(time.Millisecond)
		n, ok := nodes[o.To.ID]
		if !ok {
			elsewhere = append(elsewhere, o)
			continue
		}
		queue = append(queue, n.Receive(now, o.Env).Msgs...)
	}
	return now, elsewhere
}
