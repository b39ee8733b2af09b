package homelock

import (
	"context"
	"fmt"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// memberState is the driver's view of membership: failure detection over
// memberlist and this node's own join or leave (mu held for all of it).
type memberState struct {
	// wantJoin: this node is not in the learned epoch and should ask to be.
	wantJoin bool
	// leaving: Leave was called (or Close hands off); never ask to join
	// again on our own.
	leaving bool
	// leftAt is when the first epoch without this node was learned while
	// leaving. The new homes of its keys pull Drained from it until
	// leftAt + EpochLease + Skew, when their gates would pass anyway: Close
	// keeps serving until then.
	leftAt   time.Time
	nextJoin time.Time
	joinSeq  int
	// rejoinAfter is the end of a restarted node's restart gate
	// (start + EpochLease + Skew, incarnation > 1). A node that is not in
	// its epoch asks to join no sooner: the keys that would move back to it
	// would wait on that gate anyway, unavailable meanwhile.
	rejoinAfter time.Time
	// downSince is when a member of the current epoch was first seen down
	// or absent from memberlist; proposed records removals already asked
	// for, per epoch number.
	downSince map[msg.Member]time.Time
	proposed  map[msg.Member]uint64
	nextScan  time.Time
}

func (m *memberState) init() {
	m.downSince = make(map[msg.Member]time.Time)
	m.proposed = make(map[msg.Member]uint64)
}

// memberKey drops the fields that do not identify a member.
func memberKey(m msg.Member) msg.Member { return msg.Member{ID: m.ID, Store: m.Store} }

// noteEpoch reacts to a learned epoch (mu held): wake the waiters on epochs,
// recompute whether cluster locks can work, and ask to join again if the
// epoch left this node out (removed by mistake: a partition, a pause).
func (n *Node) noteEpoch() {
	close(n.epochCh)
	n.epochCh = make(chan struct{})
	l, ok := n.core.Current()
	n.lockable, n.unlockable = false, "no epoch learned yet"
	if !ok || l.Epoch.Number == 0 {
		return
	}
	switch {
	case n.core.NeedsJoin():
		// Removed, or restarted with another address or protocol version (a
		// rolling upgrade): the epoch must carry this node as it is now.
		n.unlockable = fmt.Sprintf("this node is not a member of epoch %d as it runs now", l.Epoch.Number)
		switch {
		case n.member.leaving:
			if !l.Epoch.Has(n.self) && n.member.leftAt.IsZero() {
				n.member.leftAt = n.core.LearnedAt()
			}
		case !n.member.wantJoin:
			attrs := []any{"epoch", l.Epoch.Number}
			if wait := n.joinDelay(n.clock.Now()); wait > 0 {
				attrs = append(attrs, "after", wait.Round(time.Millisecond), "why", "restart gate")
			}
			n.log.Warn("not in the learned epoch as it runs now; asking to join again", attrs...)
			n.member.wantJoin = true
			n.member.nextJoin = time.Time{}
		}
	default:
		n.member.wantJoin = false
		for _, m := range l.Epoch.Members {
			if m.Version != n.self.Version {
				n.unlockable = fmt.Sprintf("member %s runs protocol version %d, this node %d", m.ID, m.Version, n.self.Version)
				return
			}
		}
		n.lockable, n.unlockable = true, ""
	}
}

// maintain runs the driver's membership duties at most every RetryInterval
// (mu held): join retries and failure detection.
func (n *Node) maintain(now time.Time) {
	if now.Before(n.member.nextScan) {
		return
	}
	n.member.nextScan = now.Add(n.cfg.RetryInterval)
	n.retryJoin(now)
	n.detectDown(now)
}

// joinEvery paces Join retries: one agreement round trip and then some.
func (n *Node) joinEvery() time.Duration { return 10 * n.cfg.RetryInterval }

// joinDelay is how long this node still holds its join requests back: until
// its restart gate ends if it restarted (incarnation > 1) and its epoch does
// not have it. A node that only needs its entry updated (same node and store,
// another address or version) keeps its keys and asks at once; so does a new
// node. Timing only: safety never rests on it.
func (n *Node) joinDelay(now time.Time) time.Duration {
	l, ok := n.core.Current()
	if !ok || l.Epoch.Number == 0 || l.Epoch.Has(n.self) {
		return 0
	}
	return max(n.member.rejoinAfter.Sub(now), 0)
}

// retryJoin sends Join to one member at a time, rotating, until an epoch
// with this node is learned.
func (n *Node) retryJoin(now time.Time) {
	if !n.member.wantJoin || n.member.leaving || now.Before(n.member.nextJoin) || n.joinDelay(now) > 0 {
		return
	}
	n.member.nextJoin = now.Add(n.joinEvery())
	seeds := n.joinSeeds()
	if len(seeds) == 0 {
		if len(n.cfg.Join) > 0 {
			_, _ = n.ml.Join(n.cfg.Join)
		}
		return
	}
	n.member.joinSeq++
	seed := seeds[n.member.joinSeq%len(seeds)]
	n.log.Debug("asking to join", "seed", seed.ID)
	n.apply(now, n.core.Join(now, seed))
}

// joinSeeds are the members to ask: those of the learned epoch if there is
// one, else the live peers memberlist knows.
func (n *Node) joinSeeds() []msg.Member {
	var out []msg.Member
	if l, ok := n.core.Current(); ok && l.Epoch.Number >= 1 {
		for _, m := range l.Epoch.Members {
			if m.ID != n.self.ID {
				out = append(out, m)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	for _, p := range n.ml.Members() {
		if !p.Local && p.State == transport.PeerAlive && p.Meta.NodeID != n.self.ID {
			out = append(out, p.Meta.Member())
		}
	}
	return out
}

// detectDown proposes an epoch without each member of the current epoch that
// memberlist has reported dead (or never reported) for DownAfter. Safety
// never rests on this: a member removed by mistake loses its liveness and
// joins again.
func (n *Node) detectDown(now time.Time) {
	l, ok := n.core.Current()
	if !ok || l.Epoch.Number == 0 || !l.Epoch.Has(n.self) {
		return
	}
	alive := make(map[msg.Member]bool)
	for _, p := range n.ml.Members() {
		if p.State != transport.PeerDead {
			alive[msg.Member{ID: p.Meta.NodeID, Store: p.Meta.StoreID}] = true
		}
	}
	for k := range n.member.downSince {
		if !l.Epoch.Has(k) {
			delete(n.member.downSince, k)
		}
	}
	for _, m := range l.Epoch.Members {
		k := memberKey(m)
		if k == memberKey(n.self) {
			continue
		}
		if alive[k] {
			delete(n.member.downSince, k)
			continue
		}
		since, seen := n.member.downSince[k]
		if !seen {
			n.member.downSince[k] = now
			continue
		}
		if now.Sub(since) < n.cfg.DownAfter || n.member.proposed[k] == l.Epoch.Number {
			continue
		}
		n.member.proposed[k] = l.Epoch.Number
		n.log.Info("member down; proposing an epoch without it", "member", m.ID, "store", msg.FormatStore(m.Store), "down", now.Sub(since), "epoch", l.Epoch.Number)
		n.apply(now, n.core.ProposeRemove(now, m))
	}
}

// bootstrap waits until memberlist shows every initial member, then starts
// agreement on epoch 1 among them and waits until it is learned.
func (n *Node) bootstrap(ctx context.Context) error {
	var members []msg.Member
	t := time.NewTicker(n.cfg.RetryInterval)
	defer t.Stop()
	for {
		members = n.initialMembers()
		if members != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("homelock: bootstrap: waiting for initial members %v in gossip (seen %v): %w", n.cfg.InitialMembers, n.gossipIDs(), ctx.Err())
		case <-t.C:
			if len(n.cfg.Join) > 0 {
				_, _ = n.ml.Join(n.cfg.Join)
			}
		}
	}
	n.mu.Lock()
	if n.usable() {
		now := n.clock.Now()
		n.apply(now, n.core.Bootstrap(now, members))
	}
	n.mu.Unlock()
	return n.waitMember(ctx, true, "bootstrap")
}

// initialMembers returns the configured initial members with their store
// IDs, addresses and versions from gossip, sorted, or nil while one is
// missing.
func (n *Node) initialMembers() []msg.Member {
	byID := make(map[msg.NodeID]msg.Member)
	for _, p := range n.ml.Members() {
		if p.State == transport.PeerAlive {
			byID[p.Meta.NodeID] = p.Meta.Member()
		}
	}
	out := make([]msg.Member, 0, len(n.cfg.InitialMembers))
	for _, id := range n.cfg.InitialMembers {
		m, ok := byID[msg.NodeID(id)]
		if !ok {
			return nil
		}
		out = append(out, m)
	}
	msg.SortMembers(out)
	return out
}

func (n *Node) gossipIDs() []string {
	var ids []string
	for _, p := range n.ml.Members() {
		ids = append(ids, fmt.Sprintf("%s(%s)", p.Meta.NodeID, p.State))
	}
	return ids
}

// joinAndWait asks to join and waits until an epoch with this node is learned.
func (n *Node) joinAndWait(ctx context.Context) error {
	n.mu.Lock()
	n.member.leaving, n.member.leftAt = false, time.Time{}
	n.member.wantJoin = true
	n.member.nextJoin = time.Time{}
	n.mu.Unlock()
	n.kickNow()
	return n.waitMember(ctx, true, "join")
}

func (n *Node) kickNow() {
	n.mu.Lock()
	n.member.nextScan = time.Time{}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// waitMember waits until the learned epoch (number ≥ 1) does or does not
// contain this node.
func (n *Node) waitMember(ctx context.Context, want bool, what string) error {
	for {
		n.mu.Lock()
		if !n.usable() {
			n.mu.Unlock()
			return fmt.Errorf("%w: %s", ErrClosed, what)
		}
		l, ok := n.core.Current()
		if ok && l.Epoch.Number >= 1 && l.Epoch.Has(n.self) == want {
			n.mu.Unlock()
			return nil
		}
		ch := n.epochCh
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			num := uint64(0)
			if ok {
				num = l.Epoch.Number
			}
			return fmt.Errorf("homelock: %s: epoch %d learned so far: %w", what, num, ctx.Err())
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
// have passed anyway (Close alone does all of this, see Close). Join brings
// the node back.
func (n *Node) Leave(ctx context.Context) error {
	n.mu.Lock()
	err := n.admissible("")
	n.mu.Unlock()
	if err != nil {
		return err
	}
	return n.handOff(ctx, "leave", nil)
}
