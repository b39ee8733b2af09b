package transport

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// receiver is the gRPC service: one Stream call per sending peer, for as
// long as that peer's connection lives.
type receiver struct {
	pb.UnimplementedTransportServer
	g *GRPC
}

// senderSlot orders one sending node's streams. When a sender reconnects,
// its old stream may still hold batches the server has not read; letting
// both deliver would reorder that sender's messages. The newest stream
// takes the slot, and an older one stops delivering as soon as it notices,
// under the same mutex that covers each delivery: a gap, never a reorder.
type senderSlot struct {
	mu  sync.Mutex
	gen uint64
	// heard is the sender's entry in GRPC.heard.
	heard *atomic.Int64
}

func (r *receiver) Stream(s grpc.ClientStreamingServer[pb.Batch, pb.StreamSummary]) error {
	g := r.g
	from, boot := streamSender(s.Context())
	// Before any of its messages is handled: an answer to one must not
	// leave on a stream to the sender's previous process (restart.go).
	g.heardFrom(from, boot)
	if err := s.SendHeader(metadata.Pairs(bootMetadataKey, formatBoot(g.boot))); err != nil {
		return err
	}
	slot, gen := g.claimSlot(from, boot)
	defer g.releaseSlot(from, slot, gen)
	return eachFrame(s, func(frame *inFrame) error {
		slot.heard.Store(time.Now().UnixNano())
		if !g.deliverFrame(from, slot, gen, frame) {
			return status.Error(codes.Aborted, "transport: superseded by a newer stream from the same node")
		}
		return nil
	})
}

// eachFrame reads s's frames until the sender ends the stream, handing
// each to f; an error of f's ends the stream with it.
func eachFrame(s grpc.ClientStreamingServer[pb.Batch, pb.StreamSummary], f func(*inFrame) error) error {
	var frame inFrame
	for {
		// The stream's messages are Batches; the batch codec reads one
		// into frame (batchcodec.go).
		err := s.RecvMsg(&frame)
		if errors.Is(err, io.EOF) {
			return s.SendAndClose(&pb.StreamSummary{})
		}
		if err != nil {
			return err
		}
		if err := f(&frame); err != nil {
			return err
		}
	}
}

// streamSender is the node ID and boot a stream's sender named in its
// metadata ("" and 0 when it named none).
func streamSender(ctx context.Context) (from msg.NodeID, boot uint64) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(senderMetadataKey); len(v) == 1 {
			from = msg.NodeID(v[0])
		}
		boot = parseBoot(md.Get(bootMetadataKey))
	}
	return from, boot
}

// deliverFrame hands frame's envelopes to the handler in order, holding the
// sender's slot so that a newer stream from the same node cannot interleave,
// and reports false, handing nothing, if such a stream superseded this one.
// The slot is let go by a defer: a handler that panics must not leave it
// held, or Stream's deferred releaseSlot would wait for it forever and the
// process would hang instead of crashing (and every other stream with it).
func (g *GRPC) deliverFrame(from msg.NodeID, slot *senderSlot, gen uint64, frame *inFrame) bool {
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.gen != gen {
		return false
	}
	for _, in := range frame.envs {
		if in.err != nil {
			g.stats.refused.Add(1)
			g.log.Debug("transport: refused envelope", "from", string(from), "err", in.err)
			continue
		}
		g.stats.received(in.env.Body.Kind(), in.size)
		if in.env.From.ID != from {
			// Only a relay writes another node's envelopes on its
			// stream (relay.go).
			g.heardRelayed(in.env.From.ID)
		}
		g.handler(in.env)
	}
	return true
}

// HeardFrom reports when a frame last arrived from each peer that has
// sent one since this transport started, whether or not its stream still
// runs: a peer that membership shows alive but that has sent nothing for
// long cannot reach this node (a partial partition).
func (g *GRPC) HeardFrom() map[msg.NodeID]time.Time {
	g.sendersMu.Lock()
	defer g.sendersMu.Unlock()
	heard := make(map[msg.NodeID]time.Time, len(g.heard))
	for id, at := range g.heard {
		if ns := at.Load(); ns != 0 {
			heard[id] = time.Unix(0, ns)
		}
	}
	return heard
}

func (g *GRPC) claimSlot(from msg.NodeID, boot uint64) (*senderSlot, uint64) {
	g.sendersMu.Lock()
	slot, ok := g.senders[from]
	if !ok {
		at := g.heard[from]
		if at == nil {
			if g.heard == nil {
				g.heard = make(map[msg.NodeID]*atomic.Int64)
			}
			if len(g.heard) >= maxHeard {
				g.forgetLongestSilent()
			}
			at = new(atomic.Int64)
			g.heard[from] = at
		}
		slot = &senderSlot{heard: at}
		g.senders[from] = slot
	}
	// Still under sendersMu: releaseSlot must not forget a slot between our
	// lookup and our claim.
	slot.mu.Lock()
	slot.gen++
	gen := slot.gen
	slot.mu.Unlock()
	g.senderBoots.Store(from, boot)
	g.sendersMu.Unlock()
	return slot, gen
}

// maxHeard bounds GRPC.heard: any process that reaches the port can open a
// stream under a sender name of its choosing, and a cluster's own members
// are far fewer.
const maxHeard = 1024

// forgetLongestSilent drops, from a full GRPC.heard, the sender heard from
// longest ago among those with no stream open (sendersMu held): a member
// still talking is never forgotten, and one that went quiet long ago has
// said all HeardFrom could tell of it.
func (g *GRPC) forgetLongestSilent() {
	var oldest msg.NodeID
	var oldestAt int64
	found := false
	for id, at := range g.heard {
		if _, open := g.senders[id]; open {
			continue
		}
		if ns := at.Load(); !found || ns < oldestAt {
			oldest, oldestAt, found = id, ns, true
		}
	}
	if found {
		delete(g.heard, oldest)
	}
}

// releaseSlot forgets the slot when its last stream ends, so the map holds
// only senders with a live stream.
func (g *GRPC) releaseSlot(from msg.NodeID, slot *senderSlot, gen uint64) {
	g.sendersMu.Lock()
	defer g.sendersMu.Unlock()
	slot.mu.Lock()
	current := slot.gen == gen
	slot.mu.Unlock()
	if current && g.senders[from] == slot {
		delete(g.senders, from)
		g.senderBoots.Delete(from)
	}
}
