package homelock

import (
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// Stats is a snapshot of a node's counters (cumulative since Open) and
// gauges (now).
type Stats struct {
	// Holder side (this node as a locker).
	Held       int    // delegations this node holds now
	Pending    int    // keys with an Acquire outstanding now
	Deferred   int    // local lockers queued now
	Admissions uint64 // critical sections admitted
	LocalFast  uint64 // of which with zero messages (the fast path)
	Releases   uint64 // delegations released to their homes
	Expired    uint64 // delegations that ran out here
	Unused     uint64 // grants not used: given back (late, recalled, withdrawn), or meant for the node's wiped old store

	// Home side (this node as an arbiter).
	Live         int    // live delegations granted by this node now
	Waiting      int    // requests queued at this node now
	Grants       uint64 // delegations granted
	Recalls      uint64 // recalls sent
	ExpiredHolds uint64 // delegations freed by waiting their lease out
	Handoffs     uint64 // delegations released while others waited: the key went to the next waiter
	Refused      uint64 // requests refused (caps, not a member, version)
	// HandedOver and TakenOver count live delegations of moved keys: handed
	// by this node, as the old home, to the key's new home, and taken over
	// by this node as the new home (docs/design.md, "Moving a running
	// section").
	HandedOver, TakenOver uint64

	// FencedWrites counts writes the embedding store refused by the fence
	// (CountFencedWrite).
	FencedWrites uint64
	// ClockJumps counts wall-clock jumps that dropped held delegations.
	ClockJumps uint64

	// Messages and bytes on the wire, in total and per message kind.
	Sent, Received transport.Counts
	ByKind         map[string]transport.KindStats
	Dropped        uint64 // full peer queues
	Lost           uint64 // failed streams
	Frames         uint64 // stream writes; Sent.Msgs / Frames envelopes each
	// Relayed counts envelopes this node sent through another member to a
	// peer it had no stream to, or one the peer stopped acknowledging, or
	// whose own envelopes came relayed (a partial partition); Forwarded
	// those it carried for others, and RelayDropped those it could not,
	// not reaching the addressee either (transport.Config.RelayAfter).
	Relayed, Forwarded, RelayDropped uint64

	// Inbox is how many received envelopes wait for a step now; InboxFull
	// counts those that found the inbox full, whose stream then waited.
	Inbox     int
	InboxFull uint64
}

// Stats returns the node's counters; it is cheap enough to scrape often.
func (n *Node) Stats() Stats {
	var s Stats
	n.lockAll()
	s.Inbox = n.in.len() // before unlockAll steps them
	s.InboxFull = n.in.full.Load()
	if n.core != nil {
		hs, ds := n.core.Stats()
		s.Held, s.Pending, s.Deferred = ds.Held, ds.Pending, ds.Deferred
		s.Admissions, s.LocalFast, s.Releases, s.Expired, s.Unused = ds.Admissions, ds.LocalFast, ds.Releases, ds.Expired, ds.Unused
		s.Live, s.Waiting = hs.Live, hs.Waiting
		s.Grants, s.Recalls, s.ExpiredHolds, s.Handoffs, s.Refused = hs.Grants, hs.Recalls, hs.ExpiredHolds, hs.Handoffs, hs.Refused
		s.HandedOver, s.TakenOver = hs.HandedOver, hs.TakenOver
	}
	n.unlockAll()
	s.FencedWrites = n.fencedWrites.Load()
	s.ClockJumps = n.clockJumps.Load()
	if n.tr != nil {
		ts := n.tr.Stats()
		s.Sent, s.Received, s.Dropped, s.Lost, s.Frames = ts.Sent, ts.Received, ts.Dropped, ts.Lost, ts.Frames
		s.Relayed, s.Forwarded, s.RelayDropped = ts.Relayed, ts.Forwarded, ts.RelayDropped
		s.ByKind = make(map[string]transport.KindStats, len(ts.ByKind))
		for k, v := range ts.ByKind {
			s.ByKind[k.String()] = v
		}
	}
	return s
}

// Status is what an operator asks a node: the epoch, its members, and
// whether cluster locks can be had.
type Status struct {
	NodeID          string
	StoreID         uint64
	Incarnation     uint64
	ProtocolVersion uint32
	// Epoch is the learned epoch number (0: none agreed yet).
	Epoch uint64
	// Members are the epoch's members, with what gossip says of each.
	Members []MemberStatus
	// LiveFor is how much epoch liveness this node holds (it grants only
	// while it holds some).
	LiveFor time.Duration
	// Available: this node is a member, every member runs its protocol
	// version, and it holds liveness. Reason says why not.
	Available bool
	Reason    string
	// Phase says where the node stands in its membership: "member",
	// "bootstrapping: waiting for n2, n3 in gossip", "joining: asked n1",
	// "restart gate: 4.1s left before asking to join", "refused: ...".
	Phase string
	// Gossip says whether this node encrypts its gossip and what it takes:
	// "off", "on", or one of the steps of turning encryption on or off
	// (docs/operations.md), to check each node's before the next restart.
	Gossip string
}

// MemberStatus is one member of the epoch.
type MemberStatus struct {
	ID      string
	StoreID uint64
	Addr    string // gRPC
	Version uint32
	// Liveness is memberlist's view: alive, suspect, dead, or unknown.
	Liveness string
	// Heard is when a peer message from the member last arrived (zero: never
	// since this node started, or the node itself). Gossip reaches a member
	// through others too, so one that is alive there but not heard from for
	// longer than its renewal rounds (EpochLease / 3) cannot reach this node.
	Heard time.Time
	// Relayed says this node sends to the member through other members: it
	// has had no stream to it, or one the member acknowledged nothing on,
	// for a quarter of MaxLease (at most a second), or the member's own
	// envelopes came relayed (a partial partition, or the member is down).
	Relayed bool
	Self    bool
}

// heardFrom is the transport's capability to say when each peer was last
// heard from (the gRPC transport has it).
type heardFrom interface {
	HeardFrom() map[msg.NodeID]time.Time
}

// relaying is the transport's capability to say which peers it reaches
// through relays (the gRPC transport has it).
type relaying interface {
	Relaying() map[msg.NodeID]bool
}

// Status reports the node's view of the cluster.
func (n *Node) Status() Status {
	st := Status{NodeID: n.cfg.NodeID, StoreID: n.self.Store, Incarnation: n.inc, ProtocolVersion: n.self.Version,
		Gossip: n.cfg.gossipEncryption()}
	live := make(map[msg.Member]string)
	if n.ml != nil {
		for _, p := range n.ml.Members() {
			live[msg.Member{ID: p.Meta.NodeID, Store: p.Meta.StoreID}] = p.State.String()
		}
	}
	var heard map[msg.NodeID]time.Time
	if h, ok := n.tr.(heardFrom); ok {
		heard = h.HeardFrom()
	}
	var relayed map[msg.NodeID]bool
	if r, ok := n.tr.(relaying); ok {
		relayed = r.Relaying()
	}
	n.lockAll()
	defer n.unlockAll()
	if n.core == nil {
		st.Reason = "not started"
		return st
	}
	l, ok := n.core.Current()
	if ok {
		st.Epoch = l.Epoch.Number
		for _, m := range l.Epoch.Members {
			lv := live[msg.Member{ID: m.ID, Store: m.Store}]
			if lv == "" {
				lv = "unknown"
			}
			st.Members = append(st.Members, MemberStatus{ID: string(m.ID), StoreID: m.Store, Addr: m.Addr,
				Version: m.Version, Liveness: lv, Heard: heard[m.ID], Relayed: relayed[m.ID], Self: m.Same(n.self)})
		}
	}
	now := n.clock.Now()
	st.LiveFor = max(n.core.LiveUntil().Sub(now), 0)
	st.Phase = n.core.PhaseDetail(now)
	switch {
	case n.failed != nil:
		st.Reason = "store failed: " + n.failed.Error()
	case n.closing:
		st.Reason = "closed"
	case !n.lockable:
		_, st.Reason = n.core.Lockable(now)
	case st.LiveFor == 0:
		st.Reason = "no epoch liveness (a majority has not answered a renewal round)"
	default:
		st.Available = true
	}
	slices.SortFunc(st.Members, func(a, b MemberStatus) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return st
}
