package transport

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// In a partial partition two nodes cannot reach each other while both reach
// a third. Membership keeps both alive (memberlist's indirect probes go
// through the third), so the epoch keeps both, and without help every key
// one of them homes could not be locked through the other until the cut
// healed. A relay is that help: a sender that has had no open stream to a
// peer for RelayAfter, or whose stream TCP has retransmitted on unanswered
// for RelayAfter (stall.go), also sends what it queues for that peer to up
// to maxRelays other peers, as a Relay call, and each writes it on its own
// stream to the addressee if that stream is open and the addressee answers
// it there (the boot check of Reached, so a relay never forwards to an
// address that reaches some other process). The reply comes back the same
// way. A relayed envelope is forwarded once: a relay puts it on its own
// stream, never on a Relay call.
//
// To the protocol a relay is a longer wire: the envelope arrives later,
// possibly twice (through two relays, or through the sender's own stream
// once it opens and delivers what waited in its queue), and the
// envelopes one node sends another may arrive out of order while the path
// changes. The state machines take all of that (the simulator's network
// delays, duplicates and reorders); T2 holds for the envelopes of one
// path.

// maxRelays bounds how many peers carry each envelope for one stuck peer:
// two, so that one relay that is cut too does not stop it, without sending
// it to every member of a large cluster.
const maxRelays = 2

// relayIfStuck sends o through relays when p's sender has been without an
// open stream, or its stream stalled, for RelayAfter, or when p relayed to
// this node within RelayAfter. The check costs three atomic loads while the
// stream is open and answered and nothing came relayed.
func (g *GRPC) relayIfStuck(p *peer, o outgoing) {
	since, in := p.troubledSince(), p.relayedIn.Load()
	if since == 0 && in == 0 {
		return
	}
	if now := time.Now().UnixNano(); !g.relayDue(since, now) && !g.answerRelayed(p, in, now) {
		return
	}
	for _, r := range g.pickRelays(p) {
		if rp := g.relaySender(r); rp != nil {
			g.stats.relayed.Add(o.count())
			rp.enqueue(o)
		}
	}
}

// relayDue reports whether a sender stuck or stalled since since (Unix ns;
// 0: neither) relays at now.
func (g *GRPC) relayDue(since, now int64) bool {
	return since != 0 && g.cfg.RelayAfter >= 0 && now-since >= int64(g.cfg.RelayAfter)
}

// answerRelayed reports whether what this node sends p goes through relays
// because p's envelopes came relayed at in (Unix ns; 0: none), within
// RelayAfter of now. A cut is most often both ways, and this node's own
// sender sees it only RelayAfter after its first unanswered write: without
// this, an answer to a relayed request (a lease renewal above all, which
// has half a lease to come back) would wait that long again. Once the
// window has passed, in is cleared, so that the send path is back to its
// atomic loads.
func (g *GRPC) answerRelayed(p *peer, in, now int64) bool {
	if in == 0 || g.cfg.RelayAfter < 0 {
		return false
	}
	if now-in < int64(g.cfg.RelayAfter) {
		return true
	}
	p.relayedIn.CompareAndSwap(in, 0)
	return false
}

// heardRelayed notes that an envelope from id arrived through a relay.
func (g *GRPC) heardRelayed(id msg.NodeID) {
	g.mu.RLock()
	p := g.peers[id]
	g.mu.RUnlock()
	if p != nil {
		p.relayedIn.Store(time.Now().UnixNano())
	}
}

// Relaying reports the peers whose envelopes this node sends through relays
// now: those its sender has had no open stream to, or a stalled one, for
// RelayAfter, and those whose own envelopes came relayed within RelayAfter.
func (g *GRPC) Relaying() map[msg.NodeID]bool {
	now := time.Now().UnixNano()
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out map[msg.NodeID]bool
	for id, p := range g.peers {
		if g.relayDue(p.troubledSince(), now) || g.answerRelayed(p, p.relayedIn.Load(), now) {
			if out == nil {
				out = make(map[msg.NodeID]bool)
			}
			out[id] = true
		}
	}
	return out
}

// pickRelays returns up to maxRelays peers other than stuck whose streams
// are open, not stalled, and answer as the process that streams to this
// node, in an order of their own per addressee, so that different
// addressees spread over different relays while one addressee keeps its
// relays (and so its order) as long as they stay usable.
func (g *GRPC) pickRelays(stuck *peer) []*peer {
	type ranked struct {
		rank uint64
		p    *peer
	}
	g.mu.RLock()
	cands := make([]ranked, 0, len(g.peers))
	for _, r := range g.peers {
		if r != stuck && r.troubledSince() == 0 && g.answers(r) {
			cands = append(cands, ranked{xxhash.Sum64String(string(stuck.id) + "\x00" + string(r.id)), r})
		}
	}
	g.mu.RUnlock()
	slices.SortFunc(cands, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	relays := make([]*peer, 0, maxRelays)
	for _, c := range cands[:min(len(cands), maxRelays)] {
		relays = append(relays, c.p)
	}
	return relays
}

// relaySender returns the sender of the Relay stream to r's node, starting
// it on first use and replacing it when r's address changed; nil after
// Close.
func (g *GRPC) relaySender(r *peer) *peer {
	g.mu.RLock()
	rp, closed := g.relays[r.id], g.closed
	g.mu.RUnlock()
	if closed {
		return nil
	}
	if rp != nil && rp.addr == r.addr {
		return rp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	if rp = g.relays[r.id]; rp != nil {
		if rp.addr == r.addr {
			return rp
		}
		rp.stop()
	}
	rp, err := newPeer(g, msg.Member{ID: r.id, Addr: r.addr}, true)
	if err != nil {
		g.log.Debug("transport: relay sender", "relay", string(r.id), "err", err)
		return nil
	}
	g.relays[r.id] = rp
	return rp
}

// Relay is the receiving end of a relay: each envelope, from the stream's
// sender itself and addressed to another node, goes on this node's own
// stream to that node when that stream is open, not stalled, and answers
// as the node; otherwise it is dropped and counted.
func (r *receiver) Relay(s grpc.ClientStreamingServer[pb.Batch, pb.StreamSummary]) error {
	g := r.g
	from, _ := streamSender(s.Context())
	if err := s.SendHeader(metadata.Pairs(bootMetadataKey, formatBoot(g.boot))); err != nil {
		return err
	}
	return eachFrame(s, func(frame *inFrame) error {
		for _, in := range frame.envs {
			g.forward(from, in)
		}
		return nil
	})
}

func (g *GRPC) forward(from msg.NodeID, in inbound) {
	if in.err == nil && (in.env.From.ID != from || in.env.To == g.cfg.NodeID) {
		in.err = errors.New("transport: relayed envelope not from the relay's sender, or addressed to the relay")
	}
	if in.err != nil {
		g.stats.refused.Add(1)
		g.log.Debug("transport: refused relayed envelope", "from", string(from), "err", in.err)
		return
	}
	g.mu.RLock()
	p := g.peers[in.env.To]
	g.mu.RUnlock()
	if p == nil || p.troubledSince() != 0 || !g.answers(p) {
		g.stats.relayDropped.Add(1)
		return
	}
	o, err := g.encode(in.env)
	if err != nil {
		g.stats.refused.Add(1)
		return
	}
	g.stats.forwarded.Add(1)
	p.enqueue(o)
}
