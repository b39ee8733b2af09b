package transport

import (
	"sync/atomic"

	"github.com/homelock/homelock/msg"
)

// Counts is a number of envelopes and their encoded size.
type Counts struct {
	Msgs  uint64
	Bytes uint64
}

// KindStats counts one message kind in each direction.
type KindStats struct {
	Sent     Counts
	Received Counts
}

// Stats is a snapshot of a transport's counters, cumulative since it started.
// Bytes are encoded envelope sizes (framing and TLS not included); with the
// in-memory transport's codec switched off they are zero.
type Stats struct {
	// Sent counts envelopes written to a peer's stream (gRPC) or handed to
	// the network (in-memory; including those the network then loses).
	Sent Counts
	// Received counts envelopes decoded and handed to the Handler.
	Received Counts
	// ByKind splits Sent and Received by message kind; kinds with no
	// traffic are absent.
	ByKind map[msg.Kind]KindStats
	// Dropped counts envelopes Send accepted but discarded because the
	// peer's queue was full (or, in-memory, a link's queue).
	Dropped uint64
	// Lost counts envelopes dequeued for a peer whose stream then failed,
	// and envelopes for a peer that was replaced or closed before they left.
	Lost uint64
	// Refused counts received envelopes that Decode refused (unknown kind or
	// field, bad enum, over a bound, malformed).
	Refused uint64
	// FaultDropped counts envelopes the in-memory network discarded by its
	// fault controls (drop rate, partition, a destination that is gone).
	FaultDropped uint64
	// Reconnects counts gRPC streams opened to a peer after its first one.
	Reconnects uint64
	// Relayed counts envelopes this node sent through relays (once per
	// relay), beside its own stream, to a peer it had been unable to open
	// a stream to, or whose stream stalled, for RelayAfter, or whose own
	// envelopes came relayed within RelayAfter; Forwarded counts envelopes it relayed for
	// others, and
	// RelayDropped those it could not, not reaching the addressee itself
	// (relay.go). Each relayed envelope is also in Sent, once per stream
	// write.
	Relayed, Forwarded, RelayDropped uint64
	// Frames counts stream writes (gRPC: one pb.Batch each) or, in memory,
	// the Send and SendBatch calls that handed envelopes to a link: Sent.Msgs
	// over Frames is how many envelopes a write carries.
	Frames uint64
}

// kindSlots covers every value of msg.Kind, so a bogus kind cannot index out
// of range.
const kindSlots = 256

type counters struct {
	sentMsgs, sentBytes, recvMsgs, recvBytes [kindSlots]atomic.Uint64

	dropped, lost, refused, faultDropped, reconnects, frames atomic.Uint64
	relayed, forwarded, relayDropped                         atomic.Uint64
}

func (c *counters) sent(k msg.Kind, n int) {
	c.sentMsgs[k].Add(1)
	c.sentBytes[k].Add(uint64(n))
}

func (c *counters) received(k msg.Kind, n int) {
	c.recvMsgs[k].Add(1)
	c.recvBytes[k].Add(uint64(n))
}

func (c *counters) snapshot() Stats {
	s := Stats{
		ByKind:       make(map[msg.Kind]KindStats),
		Dropped:      c.dropped.Load(),
		Lost:         c.lost.Load(),
		Refused:      c.refused.Load(),
		FaultDropped: c.faultDropped.Load(),
		Reconnects:   c.reconnects.Load(),
		Frames:       c.frames.Load(),
		Relayed:      c.relayed.Load(),
		Forwarded:    c.forwarded.Load(),
		RelayDropped: c.relayDropped.Load(),
	}
	for k := range kindSlots {
		ks := KindStats{
			Sent:     Counts{Msgs: c.sentMsgs[k].Load(), Bytes: c.sentBytes[k].Load()},
			Received: Counts{Msgs: c.recvMsgs[k].Load(), Bytes: c.recvBytes[k].Load()},
		}
		if ks == (KindStats{}) {
			continue
		}
		s.ByKind[msg.Kind(k)] = ks
		s.Sent.Msgs += ks.Sent.Msgs
		s.Sent.Bytes += ks.Sent.Bytes
		s.Received.Msgs += ks.Received.Msgs
		s.Received.Bytes += ks.Received.Bytes
	}
	return s
}
