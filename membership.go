package homelock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// The driver's side of membership: it feeds memberlist's view into the core
// (core.Node.Gossip), runs core.Node.Maintain, and carries out what comes
// back: memberlist joins (off the lock), the gossip addresses to keep, a
// refused duplicate ID. Every decision is the core's (internal/core
// members.go); docs/membership.md tells the whole story.

// memberState is what the driver keeps beside the core's decisions (mu held).
type memberState struct {
	nextScan time.Time
	// lastPhase is the last phase detail logged, so a wait is logged once
	// per change rather than per scan.
	lastPhase string
	// lastMixed is the mixed-cluster reason logMixed last logged.
	lastMixed string
	// unreached are the members logUnreached saw last, each logged once.
	unreached []msg.Member
	// gossiping holds the gossip addresses a join goroutine is dialling.
	gossiping map[string]bool
	joins     sync.WaitGroup
}

func (m *memberState) init() { m.gossiping = make(map[string]bool) }

// gossipView is memberlist's view as the core takes it, on the lease clock.
func (n *Node) gossipView(now time.Time) []core.GossipPeer {
	ps := n.ml.Members()
	out := make([]core.GossipPeer, 0, len(ps))
	for _, p := range ps {
		st := core.PeerAlive
		switch p.State {
		case transport.PeerSuspect:
			st = core.PeerSuspect
		case transport.PeerDead:
			st = core.PeerDead
		}
		out = append(out, core.GossipPeer{Member: p.Meta.Member(), Gossip: p.Addr, State: st,
			Since: now.Add(-time.Since(p.Since)), Local: p.Local, Timings: p.Meta.Timings})
	}
	return out
}

// noteEpoch reacts to a learned epoch (mu held): wake the waiters on epochs,
// recompute whether cluster locks can work.
func (n *Node) noteEpoch() {
	close(n.epochCh)
	n.epochCh = make(chan struct{})
	now := n.clock.Now()
	n.lockable, _ = n.core.Lockable(now)
	n.logPhase(now)
	n.logMixed()
}

// logPhase logs where this node stands when that changed (mu held): the
// bootstrap wait, a join, the restart gate.
func (n *Node) logPhase(now time.Time) {
	ph := n.core.Phase(now)
	detail := n.core.PhaseDetail(now)
	if ph == core.PhaseRestartGate {
		detail = "restart gate" // the seconds left change every scan
	}
	if detail == n.member.lastPhase {
		return
	}
	n.member.lastPhase = detail
	attrs := []any{"phase", n.core.PhaseDetail(now)}
	if l, ok := n.core.Current(); ok {
		attrs = append(attrs, "epoch", l.Epoch.Number)
	}
	switch ph {
	case core.PhaseMember:
		n.log.Info("member of the learned epoch", attrs...)
	case core.PhaseDuplicate:
		n.log.Error("join refused: duplicate node ID", attrs...)
	default:
		n.log.Info("membership", attrs...)
	}
}

// maintain runs the membership duties at most every RetryInterval (mu held).
func (n *Node) maintain(now time.Time) {
	if now.Before(n.member.nextScan) {
		return
	}
	n.member.nextScan = now.Add(n.cfg.RetryInterval)
	n.core.Gossip(now, n.gossipView(now))
	n.apply(now, n.core.Maintain(now))
	n.lockable, _ = n.core.Lockable(now)
	n.logPhase(now)
	n.logMixed()
	n.logUnreached(now)
}

// logUnreached logs, once each, the nodes that keep asking to join though
// this node answers them with its epoch, or holds their asks because their
// address never answered (core.Node.Unreached): nothing it sends them
// arrives (mu held).
func (n *Node) logUnreached(now time.Time) {
	u := n.core.Unreached(now)
	for _, m := range u {
		if !slices.Contains(n.member.unreached, m) {
			n.log.Error("a node keeps asking to join though it is answered with the epoch: nothing sent to it at its advertised address arrives (it is not let in while so, and if it is a member, the keys it is home for answer nobody); is its advertised address right? (docs/operations.md)",
				"member", m.ID, "store", msg.FormatStore(m.Store), "addr", m.Addr)
		}
	}
	n.member.unreached = u
}

// logMixed logs when cluster locks become unavailable because members run
// other protocol versions or peers other safety timings, and when that ends
// (mu held).
func (n *Node) logMixed() {
	why := n.core.Mixed()
	if why == n.member.lastMixed {
		return
	}
	if why != "" {
		n.log.Error("mixed cluster", "why", why)
	} else {
		n.log.Info("cluster locks available again: every member runs this node's protocol version and timings")
	}
	n.member.lastMixed = why
}

// carryMembership carries out a Ready's membership outputs (mu held).
func (n *Node) carryMembership(now time.Time, rd core.Ready) {
	for _, m := range rd.ProposedRemove {
		n.log.Info("member down while a majority looks alive; proposing an epoch without it",
			"member", m.ID, "store", msg.FormatStore(m.Store), "down", n.core.DownFor(now, m).Round(time.Millisecond))
	}
	if rd.SaveGossip != nil {
		if err := n.store.SaveGossipAddrs(rd.SaveGossip); err != nil {
			n.log.Warn("cannot keep the members' gossip addresses", "err", err)
		}
	}
	for _, a := range rd.GossipJoin {
		n.gossipJoin(a)
	}
	if rd.Duplicate {
		n.logPhase(now)
		close(n.epochCh) // wake Open's wait: it returns ErrDuplicateNodeID
		n.epochCh = make(chan struct{})
	}
}

// gossipJoin dials addr in memberlist off the lock: a stopped peer holds a
// join for the TCP timeout (mu held).
func (n *Node) gossipJoin(addr string) {
	if n.member.gossiping[addr] || n.closed {
		return
	}
	n.member.gossiping[addr] = true
	n.member.joins.Add(1)
	go func() {
		defer n.member.joins.Done()
		_, err := n.ml.Join([]string{addr})
		n.lockAll()
		delete(n.member.gossiping, addr)
		n.unlockAll()
		if err != nil {
			n.log.Debug("gossip join failed", "addr", addr, "err", err)
		}
	}()
}

// initialIDs is Config.InitialMembers as the core names them.
func (n *Node) initialIDs() []msg.NodeID {
	ids := make([]msg.NodeID, len(n.cfg.InitialMembers))
	for i, id := range n.cfg.InitialMembers {
		ids[i] = msg.NodeID(id)
	}
	return ids
}

// joinAndWait asks to join and waits until an epoch with this node is learned.
func (n *Node) joinAndWait(ctx context.Context) error {
	n.lockAll()
	n.core.WantJoin()
	n.unlockAll()
	n.kickNow()
	return n.waitMember(ctx, true, "join")
}

func (n *Node) kickNow() {
	n.lockAll()
	n.member.nextScan = time.Time{}
	n.unlockAll()
	n.kickTimer()
}

// waitMember waits until the learned epoch (number ≥ 1) does or does not
// contain this node.
func (n *Node) waitMember(ctx context.Context, want bool, what string) error {
	for {
		n.lockAll()
		if !n.usable() {
			n.unlockAll()
			return fmt.Errorf("%w: %s", ErrClosed, what)
		}
		if dup := n.core.Duplicate(); dup != "" {
			n.unlockAll()
			return fmt.Errorf("%w: %s: node %s: %s", ErrDuplicateNodeID, what, n.cfg.NodeID, dup)
		}
		l, ok := n.core.Current()
		if ok && l.Epoch.Number >= 1 && l.Epoch.Has(n.self) == want {
			n.unlockAll()
			return nil
		}
		ch := n.epochCh
		n.unlockAll()
		select {
		case <-ctx.Done():
			num := uint64(0)
			if ok {
				num = l.Epoch.Number
			}
			n.lockAll()
			phase := n.core.PhaseDetail(n.clock.Now())
			n.unlockAll()
			return fmt.Errorf("homelock: %s: epoch %d learned so far (%s): %w", what, num, phase, ctx.Err())
		case <-ch:
		}
	}
}

// Join adds this node to the cluster through the gossip addresses of running
// members (in addition to Config.Join) and returns once an epoch with this
// node is learned. It is for a node that left; a new node joins in Open, and
// a restarted node that is not in its epoch asks to join on its own, once its
// restart gate (EpochLease + Skew after Open) has passed.
func (n *Node) Join(ctx context.Context, addrs ...string) error {
	if len(addrs) > 0 {
		if _, err := n.ml.Join(addrs); err != nil {
			return fmt.Errorf("homelock: join gossip via %v: %w", addrs, err)
		}
	}
	return n.joinAndWait(ctx)
}

// Leave removes this node from the cluster: it asks the members to agree on
// an epoch without it and waits until that epoch is learned; then the keys it
// was home for move to their new homes (which query it for a clean drain),
// and the delegations it holds are recalled. Leave returns once this node
// neither grants nor holds any delegation, or ctx ends. Call Close after it:
// Close keeps answering the new homes' drain queries until their gates would
// have passed anyway (Close alone does all of this, see Close). If ctx ends
// while this node is still a member, the node goes on asking to leave; Join
// takes that back, and brings a node that left back.
func (n *Node) Leave(ctx context.Context) error {
	n.lockAll()
	err := n.admissible("")
	n.unlockAll()
	if err != nil {
		return err
	}
	return n.handOff(ctx, "leave", false)
}
