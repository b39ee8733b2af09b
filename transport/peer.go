package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// senderMetadataKey carries the sending node's ID on each stream, so the
// receiver can order a sender's streams across reconnects.
const senderMetadataKey = "homelock-from"

// batchOverhead is what the Batch wrapper adds per envelope at most (tag and
// length varint), kept free below MaxMsgSize.
const batchOverhead = 16

// outgoing is one slot of a peer's queue: an envelope, or (group set) a
// batch queued at once by SendBatch, which leaves in one frame.
type outgoing struct {
	kind  msg.Kind
	data  []byte
	group []outgoing
}

// flat appends o's envelopes to into, in order.
func (o *outgoing) flat(into []outgoing) []outgoing {
	if o.group != nil {
		return append(into, o.group...)
	}
	return append(into, *o)
}

func (o *outgoing) count() uint64 {
	if o.group != nil {
		return uint64(len(o.group))
	}
	return 1
}

// peer is everything this node keeps for sending to one other node: a
// bounded queue that Send fills without blocking, and one goroutine that
// drains it in batches into a long-lived client stream.
type peer struct {
	g    *GRPC
	id   msg.NodeID
	addr string
	log  *slog.Logger
	q    chan outgoing

	conn   *grpc.ClientConn
	client pb.TransportClient
	ctx    context.Context
	cancel context.CancelFunc

	// heard is the boot of the peer's process that last opened a stream
	// to this node (0: none since the sender last acted on it): a stream
	// to another boot of it is to a process that is gone (restart.go).
	heard atomic.Uint64
	// answer is the boot that the process at addr named in the header of
	// this peer's latest stream (0: no header named one yet), for Reached.
	answer atomic.Uint64

	// relay makes this a relay sender: its stream is a Relay call to the
	// node at addr, carrying envelopes addressed to others (relay.go).
	relay bool
	// stuckSince is when the sender found it had no open stream to write
	// on and began opening one (Unix ns; 0 while a stream is open). A
	// sender stuck for RelayAfter has its envelopes sent through relays
	// too.
	stuckSince atomic.Int64
	// stalledSince is when the peer last acknowledged anything on a
	// connection that TCP is retransmitting on (Unix ns; 0 unless the
	// sender's last check found it so for RelayAfter, stall.go). A stalled
	// sender relays as a stuck one does.
	stalledSince atomic.Int64
	// relayedIn is when an envelope from this peer last arrived through a
	// relay (Unix ns; 0: not within RelayAfter, as far as the sender last
	// looked). A peer that relays to this node cannot reach it directly,
	// and most likely this node cannot reach it either, so for RelayAfter
	// what is sent to it goes through relays as well (relay.go).
	relayedIn atomic.Int64
	// sock is the TCP connection gRPC dialled last for this peer (the
	// sender goroutine reads it; the dialer runs on gRPC's).
	sock atomic.Pointer[net.TCPConn]
}

func newPeer(g *GRPC, to msg.Member, relay bool) (*peer, error) {
	p := &peer{
		g:     g,
		id:    to.ID,
		addr:  to.Addr,
		log:   g.log.With("peer", string(to.ID), "addr", to.Addr),
		q:     make(chan outgoing, g.cfg.QueueLen),
		relay: relay,
	}
	conn, err := g.dial(to.Addr, p.dialer())
	if err != nil {
		return nil, fmt.Errorf("transport: peer %s at %q: %w", to.ID, to.Addr, err)
	}
	p.conn, p.client = conn, pb.NewTransportClient(conn)
	ctx, cancel := context.WithCancel(g.ctx)
	p.ctx = metadata.AppendToOutgoingContext(ctx, senderMetadataKey, string(g.cfg.NodeID), bootMetadataKey, formatBoot(g.boot))
	p.cancel = cancel
	if relay {
		p.log = p.log.With("relay", true)
	}
	g.wg.Add(1)
	go p.run()
	return p, nil
}

func (p *peer) enqueue(o outgoing) {
	select {
	case p.q <- o:
	default:
		p.g.stats.dropped.Add(o.count())
	}
}

// dial makes a client connection to addr (it connects when first used)
// through dialer.
func (g *GRPC) dial(addr string, dialer func(context.Context, string) (net.Conn, error)) (*grpc.ClientConn, error) {
	// passthrough: the address is dialled as given, without a resolver
	// goroutine or a DNS lookup on the send path.
	return grpc.NewClient("passthrough:///"+addr, append(g.dialOpts[:len(g.dialOpts):len(g.dialOpts)], grpc.WithContextDialer(dialer))...)
}

// stop ends the sender goroutine; it does not wait (GRPC.Close does).
func (p *peer) stop() { p.cancel() }

// stream is one open client stream and the signal that it ended.
type stream struct {
	s      grpc.ClientStream
	cancel context.CancelFunc
	// ended is closed when the receiver ended the stream or the connection
	// broke; the sender then opens a new one before its next batch instead
	// of losing that batch to a dead stream.
	ended chan struct{}
	// remote is the boot of the process that accepted the stream, once
	// its header came (0 before, or from a receiver that sends none).
	remote atomic.Uint64
}

func (p *peer) run() {
	defer p.g.wg.Done()
	var pending []outgoing // dequeued, not yet written
	defer func() {
		p.conn.Close()
		// What is still queued or pending never left.
		lost := uint64(len(pending))
	drain:
		for {
			select {
			case o := <-p.q:
				lost += o.count()
			default:
				break drain
			}
		}
		p.g.stats.lost.Add(lost)
	}()

	var (
		cur     *stream
		opened  int
		backoff = p.g.cfg.ReconnectBase
		frame   outFrame
		checked time.Time // the last stall check
		written writtenLog
		// probe is the stall check's timer while what was written waits
		// for an acknowledgement (stall.go); probeC is its channel while
		// armed, nil otherwise.
		probe  *time.Timer
		probeC <-chan time.Time
	)
	armProbe := func() {
		if probeC != nil || p.stalledSince.Load() != 0 {
			return
		}
		d := stallCheckEvery(p.g.cfg.RelayAfter)
		if probe == nil {
			probe = time.NewTimer(d)
		} else {
			probe.Reset(d)
		}
		probeC = probe.C
	}
	defer func() {
		if cur != nil {
			cur.cancel()
		}
		if probe != nil {
			probe.Stop()
		}
	}()
	for {
		if len(pending) == 0 {
			select {
			case o := <-p.q:
				pending = o.flat(pending)
			case <-probeC:
				probeC = nil
				checked = time.Now()
				newly, outstanding := p.checkStall(checked, p.g.cfg.RelayAfter)
				if newly {
					// What Send queued before the stall was
					// seen went through no relay either.
					pending = p.fill(pending)
					p.relayUnanswered(&written, pending)
				} else if outstanding {
					armProbe()
				}
				continue
			case <-p.ctx.Done():
				return
			}
		}
		pending = p.fill(pending)
		batch := p.frame(pending)

		if cur != nil && p.leaveGoneProcess(cur) {
			cur.cancel()
			cur = nil
			p.redial()
		}
		for cur == nil || isClosed(cur.ended) {
			if cur != nil {
				cur.cancel()
				cur = nil
			}
			// A stream that broke after it stalled has been of no use
			// since the stall began.
			start := p.stalledSince.Load()
			if start == 0 {
				start = time.Now().UnixNano()
			}
			p.stuckSince.CompareAndSwap(0, start)
			s, err := p.open()
			if err == nil {
				p.stuckSince.Store(0)
				cur = s
				if opened > 0 {
					p.g.stats.reconnects.Add(1)
				}
				opened++
				backoff = p.g.cfg.ReconnectBase
				break
			}
			if p.ctx.Err() != nil {
				return
			}
			p.log.Debug("transport: stream to peer failed to open", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return
			}
			backoff = min(2*backoff, p.g.cfg.ReconnectMax)
			// While the peer is down the queue keeps filling, and Send drops
			// beyond QueueLen; this batch waits for the next stream.
		}

		frame = batch
		if p.checkStallDue(&checked) {
			// Send relayed none of these: they were written or queued
			// before the stall was seen. The first of them is often the
			// one that cannot wait (a renewal with half a lease left).
			p.relayUnanswered(&written, pending)
		}
		if err := cur.s.SendMsg(&frame); err != nil {
			p.log.Debug("transport: stream to peer broke", "err", err, "lost", len(batch))
			p.g.stats.lost.Add(uint64(len(batch)))
			cur.cancel()
			cur = nil
		} else {
			p.g.stats.frames.Add(1)
			for _, o := range batch {
				p.g.stats.sent(o.kind, len(o.data))
			}
			if p.checksStalls() {
				written.add(batch, time.Now().UnixNano(), writtenKeep(p.g.cfg.RelayAfter))
				armProbe()
			}
		}
		// The frame is gone either way: written, or lost with the stream.
		n := copy(pending, pending[len(batch):])
		clear(pending[n:])
		pending = pending[:n]
	}
}

// fill adds whatever else is queued while pending has room for a frame, so
// one stream write carries a burst. A SendBatch group is taken whole.
func (p *peer) fill(pending []outgoing) []outgoing {
	for len(pending) < p.g.cfg.MaxBatch {
		select {
		case o := <-p.q:
			pending = o.flat(pending)
		default:
			return pending
		}
	}
	return pending
}

// frame is the longest prefix of pending that one stream write may carry:
// at most MaxBatch envelopes, below MaxMsgSize, and at least one (Send
// refuses an envelope that would not fit alone). The rest waits, in order,
// for the next write.
func (p *peer) frame(pending []outgoing) []outgoing {
	size := 0
	for i, o := range pending {
		size += len(o.data) + batchOverhead
		if i > 0 && (i >= p.g.cfg.MaxBatch || size > p.g.cfg.MaxMsgSize) {
			return pending[:i]
		}
	}
	return pending
}

// open starts a stream. WaitForReady makes it wait for the connection
// (which grpc redials with the configured backoff) instead of failing at
// once while the peer is down. Its frames go through the batch codec.
func (p *peer) open() (*stream, error) {
	ctx, cancel := context.WithCancel(p.ctx)
	call := p.client.Stream
	if p.relay {
		call = p.client.Relay
	}
	s, err := call(ctx, grpc.WaitForReady(true), grpc.ForceCodecV2(p.g.codec))
	if err != nil {
		cancel()
		return nil, err
	}
	st := &stream{s: s, cancel: cancel, ended: make(chan struct{})}
	p.g.wg.Add(1)
	go func() {
		defer p.g.wg.Done()
		defer close(st.ended)
		// The receiver's header names its process; one of an earlier
		// release sends none, and Header returns when the stream ends.
		if md, err := s.Header(); err == nil {
			b := parseBoot(md.Get(bootMetadataKey))
			st.remote.Store(b)
			if b != 0 && !p.relay {
				p.answer.Store(b)
			}
		}
		// The receiver never answers before the stream ends, so RecvMsg
		// returns exactly when the stream is over, for whatever reason.
		err := s.RecvMsg(new(pb.StreamSummary))
		if ctx.Err() == nil {
			p.log.Debug("transport: stream to peer ended", "err", err)
		}
	}()
	return st, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
