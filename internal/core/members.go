package core

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/homelock/homelock/msg"
)

// Membership decisions: failure detection, join and rejoin pacing, the
// restart gate, gossip re-forming, duplicate node IDs and the Leave/Close
// handoff's blockers. They are pure like the rest of the core: the failure
// detector's view (Gossip) is an input, and what the driver must do with
// memberlist (GossipJoin, SaveGossip) is an output in Ready. Safety never
// rests on any of it; it decides only how soon and how often epochs change.
//
// The rules that keep epoch changes bounded (docs/membership.md):
//   - A member counts as down only while this node sees a majority of its
//     epoch alive in gossip (itself included). A node that has heard no
//     gossip since it started, or sits on the minority side of a partition,
//     never proposes a removal: its view says nothing about the others.
//   - A removal is proposed after the member looked down for DownAfter
//     without a break, once per member and epoch; a member that looks alive
//     again before the removal is agreed has the wish withdrawn.
//   - A node asks to join only members it sees alive in gossip, so that a
//     join is never agreed that failure detection would undo at once.
//   - Every epoch member that does not look alive is joined in gossip again
//     and again, with backoff, as long as it is in the epoch; so a partition
//     or a restart without seeds heals by itself.

// Liveness is what the failure detector says of a peer.
type Liveness uint8

const (
	PeerAlive Liveness = iota + 1
	PeerSuspect
	PeerDead
)

// GossipPeer is one entry of the failure detector's view.
type GossipPeer struct {
	// Member is what the peer advertises: node ID, store ID, transport
	// address and protocol version.
	Member msg.Member
	// Gossip is its gossip address (host:port), for rejoining it.
	Gossip string
	State  Liveness
	// Since is when the peer entered State, on this node's clock.
	Since time.Time
	// Local marks this node itself.
	Local bool
	// Timings are the safety timings the peer advertises (zero: none, an
	// earlier release).
	Timings msg.Timings
}

// MembersConfig paces the membership decisions.
type MembersConfig struct {
	// DownAfter is how long a member must look down, while this node sees
	// a live majority, before this node proposes an epoch without it.
	DownAfter time.Duration
	// JoinEvery paces Join requests (one agreement round trip and then some).
	JoinEvery time.Duration
	// RejoinAfter is the end of a restarted node's restart gate: a node not
	// in its epoch asks to join no sooner (the keys that would move back to
	// it wait on that gate anyway). Zero for a node that did not restart.
	RejoinAfter time.Time
	// GossipRetry is the first wait between gossip joins to an unreachable
	// member; it doubles up to GossipRetryMax.
	GossipRetry, GossipRetryMax time.Duration
	// Seeds are configured gossip addresses (Config.Join), tried while this
	// node sees no other member alive.
	Seeds []string
	// Known are gossip addresses remembered from earlier runs, by node ID.
	Known map[msg.NodeID]string
}

// MembersPacing is the pacing both drivers use (the root package and the
// simulator), from the retry interval and DownAfter: a join every ten
// retries (one agreement round trip and then some), gossip rejoins from ten
// retries up to half of DownAfter (at most 5s), so a healed partition is
// rejoined well before failure detection would remove anyone again.
func MembersPacing(retry, downAfter time.Duration) MembersConfig {
	return MembersConfig{
		DownAfter:      downAfter,
		JoinEvery:      10 * retry,
		GossipRetry:    10 * retry,
		GossipRetryMax: max(10*retry, min(downAfter/2, 5*time.Second)),
	}
}

// Phase names where a node stands in forming or keeping its membership.
type Phase uint8

const (
	PhaseMember      Phase = iota // in its epoch as it runs now
	PhaseBootstrap                // waiting for the initial members
	PhaseJoining                  // asking to join
	PhaseRestartGate              // not in its epoch; asks once its restart gate passed
	PhaseLeaving                  // Leave or Close asked for an epoch without it
	PhaseOut                      // not in its epoch, not asking (left)
	PhaseDuplicate                // refused: another live node has its ID
)

// members is the membership state of one core.Node.
type members struct {
	cfg  MembersConfig
	view []GossipPeer
	// heard: some other peer looked alive in gossip since this node started.
	heard bool

	wantJoin bool
	leaving  bool
	// leftAt is when the first epoch without this node was learned while
	// leaving. The new homes of its keys pull Drained from it until
	// leftAt + EpochLease + Skew, when their gates would pass anyway.
	leftAt   time.Time
	nextJoin time.Time
	// asked: Leave was called (Leaving alone, as Close's check does, sends
	// nothing); nextLeave is when Maintain sends the Leave again; guarded:
	// Close's Leave, which asks nothing while HandOffBlocker has a reason.
	asked, guarded bool
	nextLeave      time.Time
	joinSeq        int
	lastSeed       msg.NodeID
	// firstAsk is when this node first asked to join since it last wanted
	// to; lastHeard when a message from another node last arrived. Asking
	// long with nothing heard back is how a node that advertises an
	// address where it cannot be reached looks from inside (H28).
	firstAsk, lastHeard time.Time
	// asking holds, by member key, the nodes that keep asking to join
	// while this node answers them with its epoch: they have not learned
	// it, so nothing this node sends them arrives (H28).
	asking map[msg.Member]askingMember
	// unproven holds, by node ID, the latest Join that would change the
	// epoch from a node whose address has not yet been shown to reach it
	// (Config.Reaches), and when it came; Maintain hands it to the epoch
	// machine once the address is shown.
	unproven map[msg.NodeID]heldJoin

	initial       []msg.NodeID // bootstrap: waiting for these in gossip
	bootstrapping bool
	// unshown are the initial members, as gossip advertises them, whose
	// addresses have not yet answered as them (Config.Reaches): the
	// bootstrap waits for them too (H28), since unshownSince.
	unshown      []msg.Member
	unshownSince time.Time

	downSince map[msg.Member]time.Time
	proposed  map[msg.Member]uint64
	// withdrawn counts removal wishes taken back (the member came back).
	withdrawn int

	// gossipAddr is the latest gossip address seen per node ID; saved marks
	// what the driver was last told to persist.
	gossipAddr map[msg.NodeID]string
	saved      map[msg.NodeID]string
	retry      map[string]*gossipRetry
	// savedFor is the epoch saveGossip last compared the addresses of, while
	// no gossip address changed since (ok): it has nothing new to say then,
	// and it runs on every gossip round.
	savedFor struct {
		number, digest uint64
		ok             bool
	}

	// duplicate is why a join was refused: another live node has this ID.
	duplicate string
}

type gossipRetry struct {
	next time.Time
	wait time.Duration
}

func (m *members) init(cfg MembersConfig) {
	m.cfg = cfg
	m.downSince = make(map[msg.Member]time.Time)
	m.proposed = make(map[msg.Member]uint64)
	m.gossipAddr = make(map[msg.NodeID]string)
	m.saved = make(map[msg.NodeID]string)
	m.retry = make(map[string]*gossipRetry)
	for id, a := range cfg.Known {
		m.gossipAddr[id], m.saved[id] = a, a
	}
}

// memberKey drops the fields that do not identify a member.
func memberKey(m msg.Member) msg.Member { return msg.Member{ID: m.ID, Store: m.Store} }

// Gossip replaces the failure detector's view. Call it before Maintain, and
// whenever memberlist reports a change.
func (n *Node) Gossip(now time.Time, peers []GossipPeer) {
	m := &n.mem
	m.view = append(m.view[:0], peers...)
	for _, p := range peers {
		if p.Local || p.State == PeerDead {
			continue
		}
		m.heard = true
		if p.Gossip != "" && m.gossipAddr[p.Member.ID] != p.Gossip {
			m.gossipAddr[p.Member.ID] = p.Gossip
			m.savedFor.ok = false
		}
		delete(m.retry, p.Gossip)
	}
	n.bookFromGossip()
	n.holder.OnTimings(now, n.timingsMismatch(now))
}

// Timings are the safety timings a node of this configuration advertises
// in gossip and expects every peer to advertise.
func (c Config) Timings() msg.Timings {
	return msg.Timings{EpochLease: c.Home.EpochLease, MaxLease: c.Home.MaxLease, Skew: c.Home.Skew, MaxDrift: c.Holder.MaxDrift}
}

// timingsMismatch describes the peers in the gossip view that advertise
// other safety timings than this node's, or returns "". A peer gossip
// calls dead still counts for its own EpochLease + Skew: it may be an old
// home cut off from everyone, granting under its liveness until then (H26).
// After that its liveness has ended, wherever it is, and a member removed
// for good stops holding the cluster's locks.
func (n *Node) timingsMismatch(now time.Time) string {
	own := n.cfg.Timings()
	var odd []GossipPeer
	for _, p := range n.mem.view {
		gone := p.State == PeerDead && !now.Before(p.Since.Add(p.Timings.EpochLease+p.Timings.Skew))
		if !p.Local && !gone && !p.Timings.IsZero() && p.Timings != own {
			odd = append(odd, p)
		}
	}
	if len(odd) == 0 {
		return ""
	}
	slices.SortFunc(odd, func(a, b GossipPeer) int { return strings.Compare(string(a.Member.ID), string(b.Member.ID)) })
	var b strings.Builder
	fmt.Fprintf(&b, "cluster locks unavailable: this node runs %s but", own)
	for i, p := range odd {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s runs %s", p.Member.ID, p.Timings)
	}
	b.WriteString(" (every node must run the same; docs/operations.md, \"Changing timings\")")
	return b.String()
}

// bookFromGossip points the address book at the address every live peer's
// process advertises now. An epoch records a member's address as it was
// when agreed; a member that restarted elsewhere since is reached only
// where it is, and a node that restarted on an old epoch would otherwise
// send its renewals, and so its only way to hear of newer epochs, to
// addresses where nothing answers. An impostor's entry (a live member's
// node ID with another store) is left out, as for its messages.
func (n *Node) bookFromGossip() {
	for i := range n.mem.view {
		p := &n.mem.view[i]
		if p.Local || p.State == PeerDead || p.Member.Addr == "" || n.impostor(p.Member) {
			continue
		}
		n.book[p.Member.ID] = p.Member
	}
}

// peer is the view's entry for member (node ID and store), if any.
func (m *members) peer(member msg.Member) (GossipPeer, bool) {
	if i := m.find(member); i >= 0 {
		return m.view[i], true
	}
	return GossipPeer{}, false
}

// find is the index of member's entry in the view, or -1. It reads the
// entries in place: a membership scan asks it for every member of the
// epoch, and copying each entry it passed cost more than comparing it.
func (m *members) find(member msg.Member) int {
	for i := range m.view {
		// Store first: an integer, and unequal for nearly every other peer.
		if p := &m.view[i]; p.Member.Store == member.Store && p.Member.ID == member.ID {
			return i
		}
	}
	return -1
}

// alive reports whether member looks alive (or merely suspect: its probes
// failed but it is not declared dead) in gossip.
func (m *members) alive(member msg.Member) bool {
	i := m.find(member)
	return i >= 0 && (m.view[i].Local || m.view[i].State != PeerDead)
}

// liveMajority reports whether this node sees a majority of e alive in
// gossip, itself included.
func (n *Node) liveMajority(e msg.Epoch) bool {
	live := 0
	for _, mb := range e.Members {
		if mb.Same(n.cfg.Self) || n.mem.alive(mb) {
			live++
		}
	}
	return live >= e.Majority()
}

// StartBootstrap makes this node wait until every initial member looks alive
// in gossip, then start agreement on epoch 1 among them (Maintain does).
func (n *Node) StartBootstrap(initial []msg.NodeID) {
	n.mem.initial = slices.Clone(initial)
	n.mem.bootstrapping = true
}

// WantJoin makes this node ask to join until an epoch with it is learned
// (a new node, or Join after Leave).
func (n *Node) WantJoin() {
	m := &n.mem
	m.leaving, m.leftAt, m.asked, m.guarded = false, time.Time{}, false, false
	m.wantJoin = true
	m.nextJoin, m.firstAsk = time.Time{}, time.Time{}
}

// Leaving makes this node stop asking to join: Leave or Close hands it off.
func (n *Node) Leaving() {
	n.mem.leaving, n.mem.wantJoin = true, false
	n.onLearned() // removed before it asked: it left then
}

// LeftAt is when the first epoch without this node was learned while it was
// leaving; zero if none yet.
func (n *Node) LeftAt() time.Time { return n.mem.leftAt }

// LingerUntil is when a node that left may stop answering the new homes'
// drain queries: their gates (learnedAt + EpochLease + Skew of the epoch
// without it) would have passed anyway. Zero before it left.
func (n *Node) LingerUntil() time.Time {
	if n.mem.leftAt.IsZero() {
		return time.Time{}
	}
	return n.mem.leftAt.Add(n.cfg.Home.EpochLease + n.cfg.Home.Skew)
}

// HandedOff reports whether this node neither grants nor holds any
// delegation: the end of a Leave's handoff.
func (n *Node) HandedOff() bool {
	return n.home.Live() == 0 && n.holder.Stats().Held == 0 // gauges: no scan
}

// Duplicate is why a join of this node was refused ("": it was not): a live
// node with another store holds its node ID in the epoch.
func (n *Node) Duplicate() string { return n.mem.duplicate }

// onLearned reacts to a learned epoch: a node that is not in it (removed by
// mistake, or restarted with another address or version) asks to join again,
// unless it is leaving.
func (n *Node) onLearned() {
	m := &n.mem
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 {
		return
	}
	if !n.NeedsJoin() {
		m.wantJoin, m.bootstrapping = false, false
		return
	}
	m.bootstrapping = false
	switch {
	case m.leaving:
		if !l.Epoch.Has(n.cfg.Self) && m.leftAt.IsZero() {
			_, m.leftAt, _ = n.ep.Current()
		}
	case !m.wantJoin && m.duplicate == "":
		m.wantJoin = true
		m.nextJoin, m.firstAsk = time.Time{}, time.Time{}
	}
}

// JoinDelay is how long this node still holds its join requests back: until
// its restart gate ends if it restarted and its epoch does not have it. A
// node that only needs its entry updated (same node and store, another
// address or version) keeps its keys and asks at once; so does a new node.
func (n *Node) JoinDelay(now time.Time) time.Duration {
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 || l.Epoch.Has(n.cfg.Self) {
		return 0
	}
	return max(n.mem.cfg.RejoinAfter.Sub(now), 0)
}

// Maintain runs the membership duties due at now: bootstrap once the initial
// members are in gossip, join and leave retries, failure detection, gossip
// rejoins. The driver calls it every RetryInterval or so, after Gossip.
func (n *Node) Maintain(now time.Time) Ready {
	n.maintainBootstrap(now)
	if n.cfg.Reaches != nil {
		n.retryUnproven(now)
	}
	n.retryJoin(now)
	n.retryLeave(now)
	n.detectDown(now)
	n.gossipJoins(now)
	n.saveGossip()
	return n.flush(now)
}

func (n *Node) maintainBootstrap(now time.Time) {
	m := &n.mem
	if !m.bootstrapping {
		return
	}
	if _, _, ok := n.ep.Current(); ok {
		return // Bootstrap already installed epoch 0 (or a Learn came)
	}
	initial, missing := n.initialMembers()
	if len(missing) > 0 {
		return
	}
	for _, mb := range initial {
		n.book[mb.ID] = mb
	}
	if n.cfg.Reaches != nil {
		// An initial member whose address does not reach it would be in
		// the first epoch without ever learning it, home for keys that
		// answer nobody (H28). Asking it for its epoch opens this node's
		// stream to its address; its own ask opens its stream to this one.
		m.unshown = m.unshown[:0]
		for _, mb := range initial {
			if mb.ID != n.cfg.Self.ID && !n.cfg.Reaches(mb) {
				m.unshown = append(m.unshown, mb)
				n.nudge(now, mb.ID, msg.EpochQuery{})
			}
		}
		if len(m.unshown) > 0 {
			if m.unshownSince.IsZero() {
				m.unshownSince = now
			}
			return
		}
	}
	n.absorbEpoch(now, n.ep.Bootstrap(now, initial))
}

// initialMembers are the initial members as gossip advertises them, sorted,
// and the IDs not (yet) alive in gossip.
func (n *Node) initialMembers() (found []msg.Member, missing []msg.NodeID) {
	for _, id := range n.mem.initial {
		if id == n.cfg.Self.ID {
			found = append(found, n.cfg.Self)
			continue
		}
		i := slices.IndexFunc(n.mem.view, func(p GossipPeer) bool { return p.Member.ID == id && p.State == PeerAlive })
		if i < 0 {
			missing = append(missing, id)
			continue
		}
		found = append(found, n.mem.view[i].Member)
	}
	msg.SortMembers(found)
	return found, missing
}

// retryJoin sends Join to one live member at a time, rotating, until an
// epoch with this node is learned. Without an epoch (a new node), the live
// peers of gossip are asked.
func (n *Node) retryJoin(now time.Time) {
	m := &n.mem
	if !m.wantJoin || m.leaving || m.duplicate != "" || now.Before(m.nextJoin) || n.JoinDelay(now) > 0 {
		return
	}
	seeds, members := n.joinSeeds()
	if !members && n.selfStale() {
		// A member whose entry is out of date (it restarted at another
		// address or version) and sees no other member alive: nobody else
		// would propose its update, so it does, as its own seed. In an
		// epoch it is the only member of, nobody else ever could.
		seeds = []msg.Member{n.cfg.Self}
	}
	if len(seeds) == 0 {
		return
	}
	m.nextJoin = now.Add(m.cfg.JoinEvery)
	if m.firstAsk.IsZero() {
		m.firstAsk = now
	}
	m.joinSeq++
	seed := seeds[m.joinSeq%len(seeds)]
	m.lastSeed = seed.ID
	// Every seed is a live gossip peer (or this node): Gossip, called
	// before Maintain, already put its address in the book.
	n.push(msg.Envelope{To: seed.ID, Body: msg.Join{Member: n.cfg.Self}})
}

// sendLeave asks every other member of the learned epoch to propose an
// epoch without this node, and paces the next ask as joins are paced. A
// guarded Leave (Close's) asks nothing while a member does not look alive:
// the ask could be what leaves an epoch without a live majority
// (HandOffBlocker), whichever ask it is.
func (n *Node) sendLeave(now time.Time) {
	m := &n.mem
	m.asked, m.nextLeave = true, now.Add(m.cfg.JoinEvery)
	l, _, ok := n.ep.Current()
	if !ok || m.guarded && n.HandOffBlocker() != "" {
		return
	}
	for _, mb := range l.Epoch.Members {
		if mb.ID != n.cfg.Self.ID {
			n.push(msg.Envelope{To: mb.ID, Body: msg.Leave{Member: n.cfg.Self}})
		}
	}
}

// retryLeave asks again, every JoinEvery, until an epoch without this node
// is learned. A Leave can be lost, or dropped by a member as stale (sent in
// an epoch older than the one it learned, epoch.staleLeave): the member then
// sends its epoch, and the next ask carries it. A node alone in its epoch
// has nobody to ask (the root refuses that Leave).
func (n *Node) retryLeave(now time.Time) {
	m := &n.mem
	if !m.leaving || !m.asked || !m.leftAt.IsZero() || now.Before(m.nextLeave) {
		return
	}
	if l, _, ok := n.ep.Current(); ok && l.Epoch.Number >= 1 && l.Epoch.Has(n.cfg.Self) {
		n.sendLeave(now)
	}
}

// selfStale reports whether this node is a member of its learned epoch (node
// ID and store) under an entry that differs from itself as it runs now.
func (n *Node) selfStale() bool {
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 {
		return false
	}
	got, in := l.Epoch.Member(n.cfg.Self.ID)
	return in && got.Store == n.cfg.Self.Store && got != n.cfg.Self
}

// joinSeeds are the members to ask, with members reporting whether they are
// members of the learned epoch: those that look alive in gossip, else the
// live peers gossip knows. The Join goes where the book says, which is where
// gossip says the peer runs now (bookFromGossip).
func (n *Node) joinSeeds() (out []msg.Member, members bool) {
	if l, _, ok := n.ep.Current(); ok && l.Epoch.Number >= 1 {
		for _, mb := range l.Epoch.Members {
			if mb.ID != n.cfg.Self.ID && n.mem.alive(mb) {
				out = append(out, mb)
			}
		}
		if len(out) > 0 {
			return out, true
		}
	}
	for _, p := range n.mem.view {
		if !p.Local && p.State == PeerAlive && p.Member.ID != n.cfg.Self.ID {
			out = append(out, p.Member)
		}
	}
	return out, false
}

// detectDown proposes an epoch without each member that looked down for
// DownAfter while this node saw a live majority; see the rules above.
func (n *Node) detectDown(now time.Time) {
	m := &n.mem
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 || !l.Epoch.Has(n.cfg.Self) || m.leaving {
		clear(m.downSince)
		return
	}
	if !m.heard || !n.liveMajority(l.Epoch) {
		// No view worth acting on: the clocks start again once there is one.
		clear(m.downSince)
		return
	}
	for k := range m.downSince {
		if !l.Epoch.Has(k) {
			delete(m.downSince, k)
		}
	}
	self := memberKey(n.cfg.Self)
	for _, mb := range l.Epoch.Members {
		k := memberKey(mb)
		if k == self {
			continue
		}
		if m.alive(mb) {
			delete(m.downSince, k)
			if _, asked := m.proposed[k]; asked {
				delete(m.proposed, k)
				if n.ep.WithdrawRemove(mb) {
					m.withdrawn++
				}
			}
			continue
		}
		since, seen := m.downSince[k]
		if !seen {
			m.downSince[k] = now
			continue
		}
		if now.Sub(since) < m.cfg.DownAfter || m.proposed[k] == l.Epoch.Number {
			continue
		}
		m.proposed[k] = l.Epoch.Number
		n.rd.ProposedRemove = append(n.rd.ProposedRemove, mb)
		n.absorbEpoch(now, n.ep.ProposeRemove(now, mb))
	}
}

// DownFor reports how long member has looked down while this node saw a live
// majority (0: it does not, or not yet).
func (n *Node) DownFor(now time.Time, member msg.Member) time.Duration {
	if s, ok := n.mem.downSince[memberKey(member)]; ok {
		return now.Sub(s)
	}
	return 0
}

// Withdrawn counts removal wishes taken back because the member came back
// before its removal was agreed.
func (n *Node) Withdrawn() int { return n.mem.withdrawn }

// gossipJoins asks the driver to join, in gossip, every epoch member that
// does not look alive (at its last known gossip address), with backoff per
// address; and the configured seeds while no other member looks alive: the
// kept addresses may all be stale (every other member restarted elsewhere
// while this node was down), and peers that are not members, a joiner
// that came in through this node say, must not stop it from looking (seed
// 1,151,759: a restarted n1 and the joiner n4 made an island that never met
// the cluster).
func (n *Node) gossipJoins(now time.Time) {
	m := &n.mem
	var want []string
	l, _, ok := n.ep.Current()
	if ok {
		for _, mb := range l.Epoch.Members {
			if mb.ID == n.cfg.Self.ID || m.alive(mb) {
				continue
			}
			if a := m.gossipAddr[mb.ID]; a != "" {
				want = append(want, a)
			}
		}
	}
	if !n.seesOther() || m.bootstrapping || !n.seesMember() {
		// Alone, or among peers none of which is a member (other joiners:
		// an island that would never meet the cluster by itself).
		want = append(want, m.cfg.Seeds...)
	}
	for _, a := range want {
		if slices.Contains(n.rd.GossipJoin, a) {
			continue
		}
		r := m.retry[a]
		if r == nil {
			r = &gossipRetry{}
			m.retry[a] = r
		}
		if now.Before(r.next) {
			continue
		}
		r.wait = min(max(2*r.wait, m.cfg.GossipRetry), max(m.cfg.GossipRetryMax, m.cfg.GossipRetry))
		r.next = now.Add(r.wait)
		n.rd.GossipJoin = append(n.rd.GossipJoin, a)
	}
}

// seesMember reports whether some other member of the learned epoch looks
// alive in gossip now.
func (n *Node) seesMember() bool {
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 {
		return false
	}
	return slices.ContainsFunc(l.Epoch.Members, func(mb msg.Member) bool {
		return mb.ID != n.cfg.Self.ID && n.mem.alive(mb)
	})
}

// seesOther reports whether some other peer looks alive in gossip now.
func (n *Node) seesOther() bool {
	return slices.ContainsFunc(n.mem.view, func(p GossipPeer) bool { return !p.Local && p.State != PeerDead })
}

// saveGossip hands the driver the gossip addresses of the epoch's members
// when they changed, for the next start to rejoin gossip without seeds.
func (n *Node) saveGossip() {
	m := &n.mem
	l, _, ok := n.ep.Current()
	if !ok {
		return
	}
	// curNumber and curDigest follow every epoch the machine returns.
	if m.savedFor.ok && m.savedFor.number == n.curNumber && m.savedFor.digest == n.curDigest {
		return
	}
	m.savedFor.number, m.savedFor.digest, m.savedFor.ok = n.curNumber, n.curDigest, true
	// The addresses seldom change when the epoch does: compare with what
	// was saved before building anything.
	same, k := true, 0
	for _, mb := range l.Epoch.Members {
		if a := m.gossipAddr[mb.ID]; a != "" && mb.ID != n.cfg.Self.ID {
			k++
			if s, ok := m.saved[mb.ID]; !ok || s != a {
				same = false
				break
			}
		}
	}
	if same && k == len(m.saved) {
		return
	}
	want := make(map[msg.NodeID]string)
	for _, mb := range l.Epoch.Members {
		if a := m.gossipAddr[mb.ID]; a != "" && mb.ID != n.cfg.Self.ID {
			want[mb.ID] = a
		}
	}
	if len(want) == 0 || mapsEqual(want, m.saved) {
		return
	}
	m.saved = want
	n.rd.SaveGossip = want
}

func mapsEqual(a, b map[msg.NodeID]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// duplicateJoin reports why a join by j must be refused: the epoch holds j's
// node ID with another store, and that store looks alive in gossip. A store
// that is really gone (a wiped disk, H21) looks dead or absent, and its
// replacement is let in.
func (n *Node) duplicateJoin(j msg.Member) string {
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 {
		return ""
	}
	cur, in := l.Epoch.Member(j.ID)
	if !in || cur.Store == j.Store {
		return ""
	}
	if cur.Same(n.cfg.Self) || n.mem.alive(cur) {
		return fmt.Sprintf("node ID %s is held by store %x, alive in gossip; this node has store %x", j.ID, cur.Store, j.Store)
	}
	return ""
}

// refuseDuplicate answers a duplicate join straight to its sender, whose
// address must not replace the live member's in the book.
func (n *Node) refuseDuplicate(env msg.Envelope) {
	reply := msg.Envelope{To: env.From.ID, Body: msg.Refused{Reason: msg.RefusedDuplicateID}}
	n.stamp(&reply)
	n.rd.Msgs = append(n.rd.Msgs, Outgoing{To: env.From, Env: reply})
}

// onDuplicateRefusal: a member refused this node's join because another live
// node has its ID. It stops asking; the driver stops the node.
func (n *Node) onDuplicateRefusal(env msg.Envelope) {
	if !n.NeedsJoin() || n.mem.duplicate != "" {
		return
	}
	n.mem.duplicate = fmt.Sprintf("member %s refused the join: another node with ID %s and another store is alive in gossip", env.From.ID, n.cfg.Self.ID)
	n.mem.wantJoin = false
	n.rd.Duplicate = true
}

// Lockable says whether cluster locks can work on this node, and why not:
// it must be a member of its epoch as it runs now, and every member must run
// its protocol version (the holder's check, the only one).
func (n *Node) Lockable(now time.Time) (bool, string) {
	l, _, ok := n.ep.Current()
	if !ok || l.Epoch.Number == 0 {
		return false, "no epoch learned yet: " + n.PhaseDetail(now)
	}
	if n.NeedsJoin() {
		return false, fmt.Sprintf("this node is not a member of epoch %d as it runs now: %s", l.Epoch.Number, n.PhaseDetail(now))
	}
	if why := n.holder.Mixed(); why != "" {
		return false, why
	}
	return true, ""
}

// heldJoin is a Join that waits for its sender's address to be shown.
type heldJoin struct {
	env msg.Envelope
	at  time.Time
}

// unprovenJoin reports whether env is a Join the learned epoch does not
// already answer (it would add the sender or change its entry) from
// another node whose advertised address has not been shown to reach it.
func (n *Node) unprovenJoin(env msg.Envelope) bool {
	j, ok := env.Body.(msg.Join)
	if !ok || n.cfg.Reaches == nil || j.Member.ID == n.cfg.Self.ID {
		return false
	}
	return !n.ep.AnswersJoin(env.Epoch, j.Member) && !n.cfg.Reaches(j.Member)
}

// holdJoin keeps an unproven Join and sends its sender the learned epoch:
// a message to its advertised address is what shows that address (the
// transport opens its connection then), and the epoch is what a joiner
// reached there needs anyway.
func (n *Node) holdJoin(now time.Time, env msg.Envelope) {
	if n.mem.unproven == nil {
		n.mem.unproven = make(map[msg.NodeID]heldJoin)
	}
	n.mem.unproven[env.From.ID] = heldJoin{env: env, at: now}
	if cur, _, ok := n.ep.Current(); ok && cur.Epoch.Number > 0 {
		n.nudge(now, env.From.ID, msg.Learn{Epoch: cur.Epoch, Cert: cur.Cert})
	}
}

// retryUnproven hands the held Joins whose senders' addresses are now shown
// to the epoch machine, as if they arrived now, and forgets those older
// than JoinEvery: their senders ask again, and held ones would only grow.
func (n *Node) retryUnproven(now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(n.mem.unproven)) {
		h := n.mem.unproven[id]
		j := h.env.Body.(msg.Join)
		switch {
		case n.cfg.Reaches(j.Member):
			delete(n.mem.unproven, id)
			n.stepEpoch(now, h.env)
		case now.Sub(h.at) > n.mem.cfg.JoinEvery:
			delete(n.mem.unproven, id)
		}
	}
}

// askingMember is one node's asks to join that this node answered with its
// epoch (AnswersJoin), and the entry the last one named.
type askingMember struct {
	first, last time.Time
	member      msg.Member
}

// unansweredAfter is how long a node may ask to join unanswered, or be
// answered with the epoch and ask again, before that reads as messages to
// it not arriving; a node that has not asked for as long has stopped (a
// joiner asks the members in turn, so each hears it only now and then).
const unansweredAfter = 10 * time.Second

// unanswered says, for a joining node's phase, that no other node has
// answered it for unansweredAfter ("" while that is not so).
func (n *Node) unanswered(now time.Time) string {
	m := &n.mem
	if m.firstAsk.IsZero() || m.lastHeard.After(m.firstAsk) || now.Sub(m.firstAsk) < unansweredAfter {
		return ""
	}
	return fmt.Sprintf(" (no answer from any node for %v: can they reach this node at %s? check --advertise-addr or Config.AdvertiseAddr)",
		now.Sub(m.firstAsk).Round(time.Second), n.cfg.Self.Addr)
}

// heardFrom notes a message from another node, and a Join that the
// learned epoch answers: from a member the epoch holds as it asks, or from
// one removed since it sent it, which has to learn the epoch before it may
// ask again (a new member is removed so when gossip shows it to some node
// later than DownAfter); or an unproven Join, held while its sender's
// address has not answered.
func (n *Node) heardFrom(now time.Time, env msg.Envelope, unproven bool) {
	if env.From.ID == n.cfg.Self.ID {
		return
	}
	n.mem.lastHeard = now
	j, ok := env.Body.(msg.Join)
	if !ok || !unproven && !n.ep.AnswersJoin(env.Epoch, j.Member) {
		return
	}
	if n.mem.asking == nil {
		n.mem.asking = make(map[msg.Member]askingMember)
	}
	k := memberKey(j.Member)
	a := n.mem.asking[k]
	if a.first.IsZero() || now.Sub(a.last) > unansweredAfter {
		a.first = now
	}
	a.last, a.member = now, j.Member
	n.mem.asking[k] = a
}

// Unreached returns the nodes, entries as their last Join named them, that
// have kept asking to join for unansweredAfter while this node answered
// each ask with its epoch: they never learned it, so what this node sends
// them does not arrive, and the keys they are home for answer nobody (H28:
// most often an advertised address that does not reach the node). A member
// removed and let in again meanwhile is still the same node asking: its
// record is kept while it is out.
func (n *Node) Unreached(now time.Time) []msg.Member {
	var out []msg.Member
	for k, a := range n.mem.asking {
		if now.Sub(a.last) > unansweredAfter {
			delete(n.mem.asking, k)
			continue
		}
		if a.last.Sub(a.first) >= unansweredAfter {
			out = append(out, a.member)
		}
	}
	msg.SortMembers(out)
	return out
}

// Phase is where this node stands in its membership.
func (n *Node) Phase(now time.Time) Phase {
	m := &n.mem
	l, _, ok := n.ep.Current()
	switch {
	case m.duplicate != "":
		return PhaseDuplicate
	case (!ok && m.bootstrapping) || (ok && l.Epoch.Number == 0):
		return PhaseBootstrap
	case !n.NeedsJoin():
		return PhaseMember
	case m.leaving:
		return PhaseLeaving
	case n.JoinDelay(now) > 0:
		return PhaseRestartGate
	case m.wantJoin:
		return PhaseJoining
	}
	return PhaseOut
}

// PhaseDetail says in words where this node stands: "bootstrapping: waiting
// for n2, n3 in gossip", "joining: asked n1", "restart gate: 4.1s left".
func (n *Node) PhaseDetail(now time.Time) string {
	m := &n.mem
	switch n.Phase(now) {
	case PhaseDuplicate:
		return "refused: " + m.duplicate
	case PhaseBootstrap:
		_, missing := n.initialMembers()
		if len(missing) > 0 {
			return "bootstrapping: waiting for " + joinIDs(missing) + " in gossip"
		}
		if _, _, ok := n.ep.Current(); !ok && len(m.unshown) > 0 {
			at := make([]string, len(m.unshown))
			for i, mb := range m.unshown {
				at[i] = fmt.Sprintf("%s at %s", mb.ID, mb.Addr)
			}
			d := "bootstrapping: waiting for an answer from " + strings.Join(at, ", ")
			if now.Sub(m.unshownSince) < addressHintAfter {
				return d // every first start waits a round trip or so
			}
			return fmt.Sprintf("%s, and for them to reach this node at %s (check each one's --advertise-addr)", d, n.cfg.Self.Addr)
		}
		return "bootstrapping: agreeing on epoch 1"
	case PhaseLeaving:
		return "leaving: asked for an epoch without this node"
	case PhaseRestartGate:
		return fmt.Sprintf("restart gate: %.1fs left before asking to join", n.JoinDelay(now).Seconds())
	case PhaseJoining:
		switch m.lastSeed {
		case "":
		case n.cfg.Self.ID:
			return "joining: no other member alive in gossip; proposing its own new entry"
		default:
			return "joining: asked " + string(m.lastSeed) + n.unanswered(now)
		}
		return "joining: no member alive in gossip yet"
	case PhaseOut:
		return "not a member and not asking to join (left)"
	}
	return "member"
}

// addressHintAfter is how long a first start waits for the initial members'
// addresses before its phase says what to check.
const addressHintAfter = 2 * time.Second

func joinIDs(ids []msg.NodeID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}

// HandOffBlocker says why Close must not hand this node's home keys off now,
// or "". Beyond being a member of an epoch of two or more, every other member
// must look alive in gossip: leaving while one is down can leave an epoch
// whose majority is not alive ({n2, n3} with n3 dead agrees nothing ever
// again, not even n3's removal), whereas a node that stays a member restores
// that majority when it restarts.
func (n *Node) HandOffBlocker() string {
	l, _, ok := n.ep.Current()
	e := l.Epoch
	switch {
	case !ok || e.Number == 0 || !e.Has(n.cfg.Self):
		return "not a member of the learned epoch"
	case len(e.Members) < 2:
		return fmt.Sprintf("the only member of epoch %d", e.Number)
	}
	for _, mb := range e.Members {
		if !mb.Same(n.cfg.Self) {
			if p, ok := n.mem.peer(mb); !ok || p.State != PeerAlive {
				return fmt.Sprintf("member %s of epoch %d does not look alive in gossip; leaving could leave an epoch without a live majority", mb.ID, e.Number)
			}
		}
	}
	return ""
}
