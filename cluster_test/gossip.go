package clustertest

import (
	"maps"
	"strings"
	"time"

	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/msg"
)

// Simulated gossip: each process's memberlist view, modelled on what
// memberlist does, feeds the production membership decisions
// (core.Node.Gossip, core.Node.Maintain) exactly as the root package does.
// The simulator makes no membership decision of its own: it only carries
// out the joins the core asks for.
//
// The model: a process probes every peer in its view; a peer it reaches
// (up, not paused, no cut either way, no gossip blackout) is alive and
// learns of the prober; one reached only through another peer (memberlist's
// indirect probe) stays alive; one not reached for suspectAfter is suspect,
// for deadAfter dead, until a peer heard from it since gossips it alive
// again (spread: memberlist's refutation). memberlist stops gossiping to a
// dead peer after gossipToDead: from then on only a join (Ready.GossipJoin,
// from either side) or such a revival brings it back, which is what made
// long partitions never heal before the core kept rejoining. A process shares its view with the peers
// it reaches. A peer under a node ID that another live process holds in the
// view is ignored (memberlist's name conflict), so an impostor never
// displaces a live node in gossip.
const (
	gossipEvery  = 100 * time.Millisecond
	suspectAfter = 300 * time.Millisecond
	deadAfter    = 900 * time.Millisecond
	gossipToDead = 2 * time.Second
)

type gossipEntry struct {
	peer     *simNode
	member   msg.Member
	lastSeen time.Time // true time
	dead     bool
	deadAt   time.Time
}

func gossipAddr(n *simNode) string {
	// Cached: every gossip tick names every peer. A test may give a node
	// another transport address, so the cache remembers what it is of.
	if n.gossipOf != n.member.Addr || n.gossip == "" {
		n.gossip, n.gossipOf = "gossip:"+n.member.Addr, n.member.Addr
	}
	return n.gossip
}

// seedName is how the configuration names n as a seed: a DNS name that
// follows the node when it moves (maybeMove), as a deployment whose
// addresses change gives --join and --initial. A node that never learned
// an epoch has only its seeds to find the cluster by; with a bare address
// that moved away, neither it nor the cluster could ever find the other.
func seedName(n *simNode) string { return "dns:" + string(n.id) }

// byName resolves a seed name to the node it names (nil: not a name). An
// impostor shares a node ID; the name belongs to the first node given it.
func (s *Sim) byName(addr string) *simNode {
	id, ok := strings.CutPrefix(addr, "dns:")
	if !ok {
		return nil
	}
	for _, n := range s.nodes {
		if string(n.id) == id {
			return n
		}
	}
	return nil
}

// up reports whether n's process runs and answers.
func (n *simNode) up() bool { return n.core != nil && !n.paused && !n.gone }

// gossipReach reports whether a's probes reach b and are answered.
func (s *Sim) gossipReach(a, b *simNode) bool {
	return b.up() && !s.net.Blocked(a.idx, b.idx) && !s.net.Blocked(b.idx, a.idx) &&
		!s.blackout[a.idx] && !s.blackout[b.idx]
}

// indirectReach: memberlist asks other peers to probe a member its own
// probes miss, so one cut link alone never makes a member dead. reach is
// gossipReach of every pair, as reachable computes it.
func indirectReach(reach [][]bool, a, b *simNode) bool {
	for _, e := range a.view {
		if c := e.peer; c != b && !e.dead && reach[a.idx][c.idx] && reach[c.idx][b.idx] {
			return true
		}
	}
	return false
}

// reachable is gossipReach of every pair of nodes, in a buffer of s's,
// valid until the next call. A gossip round asks it of every pair and, for
// each probe that misses, of every peer in between: under a partition that
// was a link lookup per pair per peer.
func (s *Sim) reachable() [][]bool {
	n := len(s.nodes)
	if len(s.reach) != n {
		s.reach = make([][]bool, n)
		cells := make([]bool, n*n)
		for i := range s.reach {
			s.reach[i] = cells[i*n : (i+1)*n]
		}
	}
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			s.reach[a.idx][b.idx] = s.gossipReach(a, b)
		}
	}
	return s.reach
}

// learn adds peer p to a's view as alive, unless another live process
// holds its node ID there (or p claims a's own ID).
func (s *Sim) learn(a, p *simNode) {
	if a == p {
		return
	}
	if p.id == a.id {
		return // a refutes: memberlist keeps its own name
	}
	if e := a.entry(p); e != nil {
		e.member, e.lastSeen, e.dead = p.member, s.now, false
		return
	}
	for _, e := range a.view {
		if e.peer.id == p.id && !e.dead {
			return // name conflict: the live holder stays
		}
	}
	a.view = append(a.view, &gossipEntry{peer: p, member: p.member, lastSeen: s.now})
}

// entry is a's view of process p (nil: unknown). Views are slices, in the
// order peers were learned, so that a seed replays exactly.
func (a *simNode) entry(p *simNode) *gossipEntry {
	for _, e := range a.view {
		if e.peer == p {
			return e
		}
	}
	return nil
}

// gossipTick probes, spreads views, and runs every live process's
// membership scan; it reschedules itself.
func (s *Sim) gossipTick() {
	// Probes change no process, link or blackout: reachability holds for
	// the whole probe loop.
	reach := s.reachable()
	for _, a := range s.nodes {
		if !a.up() {
			continue
		}
		for _, e := range a.view {
			b := e.peer
			if e.dead && s.now.Sub(e.deadAt) >= gossipToDead {
				continue // given up on: only a join revives it
			}
			if reach[a.idx][b.idx] {
				s.learn(a, b)
				s.learn(b, a)
				s.spread(a, b)
				continue
			}
			if !e.dead && indirectReach(reach, a, b) {
				e.lastSeen = s.now // another peer's probe answered for it
				continue
			}
			if !e.dead && s.now.Sub(e.lastSeen) >= deadAfter {
				e.dead, e.deadAt = true, s.now
			}
		}
	}
	for _, a := range s.nodes {
		if a.up() {
			now := a.local(s.now)
			a.core.Gossip(now, s.coreView(a))
			a.apply(s, a.core.Maintain(now))
		}
		if a.core != nil {
			a.removed = a.core.NeedsJoin()
		}
	}
	s.checkHealing()
	if s.now.Before(simBase.Add(s.cfg.Duration)) {
		s.After(gossipEvery, s.gossipTick)
	}
}

// spread is what a learns from b's view when a's probe reaches b, or a
// memberlist join between them exchanges their states: every peer b holds
// alive that a does not know, and every peer a holds dead that b has heard
// from since a declared it dead. The second is memberlist's
// refutation: a member that hears it was declared dead (the dead message
// reaches it through any peer that reaches both) gossips itself alive under
// a higher incarnation, and that revives it everywhere the gossip reaches,
// where indirect probes then keep it alive. Without it, a member cut from
// one peer but reached by another stayed dead in the first one's view for
// good, and was removed, rejoined and removed again for as long as the cut
// lasted (seed 8031513 over a minute).
func (s *Sim) spread(a, b *simNode) {
	for _, pe := range b.view {
		if pe.dead || pe.peer == a {
			continue
		}
		if e := a.entry(pe.peer); e == nil || (e.dead && pe.lastSeen.After(e.deadAt)) {
			s.learn(a, pe.peer)
		}
	}
}

// coreView is a's view as core.GossipPeer values, on a's clock. The slice
// is a's own buffer, valid until the next call (core.Node.Gossip copies it).
func (s *Sim) coreView(a *simNode) []core.GossipPeer {
	out := append(a.viewBuf[:0], core.GossipPeer{Member: a.member, Gossip: gossipAddr(a), State: core.PeerAlive, Local: true})
	for _, e := range a.view {
		st := core.PeerAlive
		since := e.lastSeen
		switch {
		case e.dead:
			st, since = core.PeerDead, e.deadAt
		case s.now.Sub(e.lastSeen) >= suspectAfter:
			st = core.PeerSuspect
		}
		out = append(out, core.GossipPeer{Member: e.member, Gossip: gossipAddr(e.peer), State: st, Since: a.local(since)})
	}
	a.viewBuf = out
	return out
}

// gossipJoin carries out a memberlist Join from a to addr: if the process
// there is reached, both learn each other and each other's views.
func (s *Sim) gossipJoin(a *simNode, addr string) {
	s.faults["gossip_join"]++
	named := s.byName(addr)
	for _, b := range s.nodes {
		if b == a || (gossipAddr(b) != addr && b != named) || !s.gossipReach(a, b) {
			continue
		}
		s.trace("gossip join %s -> %s", a.id, b.id)
		s.learn(a, b)
		s.learn(b, a)
		// memberlist's push-pull: each takes the other's view, where an
		// alive entry revives a dead one only if it is newer (spread).
		s.spread(a, b)
		s.spread(b, a)
	}
}

// carryMembership carries out a Ready's membership outputs as the root
// package does: memberlist joins (after a round trip), the gossip addresses
// to keep on disk, a refused duplicate ID (the process exits).
func (s *Sim) carryMembership(n *simNode, rd core.Ready) {
	for _, m := range rd.ProposedRemove {
		s.faults["agreed_down"]++
		s.trace("agreed down %s by %s", m.ID, n.id)
	}
	if rd.SaveGossip != nil {
		n.disk.known = maps.Clone(rd.SaveGossip)
	}
	gen := n.gen
	for _, a := range rd.GossipJoin {
		s.After(time.Millisecond, func() {
			if n.gen == gen && n.up() {
				s.gossipJoin(n, a)
			}
		})
	}
	if rd.Duplicate {
		s.faults["duplicate_refused"]++
		s.trace("duplicate %s refused: %s", n.id, n.core.Duplicate())
		n.gone = true
		s.After(0, func() { s.crash(n) })
	}
}
