package transport

import (
	"errors"

	"github.com/homelock/homelock/msg"
)

// Handler receives each envelope that arrived and decoded. It is called from
// transport goroutines: sequentially and in send order for any one sender,
// possibly concurrently for different senders. It must not block long, since
// while it runs nothing more from that sender is delivered; a driver hands
// the envelope to its own loop and returns.
type Handler func(msg.Envelope)

// Transport moves envelopes between nodes. It makes no protocol decision: it
// neither reorders nor retries nor inspects bodies beyond encoding them.
// All methods are safe for concurrent use.
type Transport interface {
	// Send queues env for the member to (its ID names the peer, its Addr is
	// where to reach it). It never blocks on the network: when to's queue is
	// full the envelope is dropped and counted in Stats.Dropped, and Send
	// still returns nil, because to the protocol a drop is the same as a loss
	// on the wire. It returns an error only for an envelope that cannot be
	// encoded (the pb errors re-exported in errors.go) and ErrClosed after
	// Close.
	Send(to msg.Member, env msg.Envelope) error
	// Stats returns a snapshot of the counters.
	Stats() Stats
	// Close stops every goroutine the transport started and waits for them;
	// no Handler call starts after Close returns. Queued envelopes are dropped.
	Close() error
}

// Batcher is the optional capability of a Transport to send several
// envelopes to one peer as one unit: the gRPC transport writes them in one
// stream frame (a pb.Batch, unless together they exceed MaxMsgSize or
// MaxBatch), so the envelopes one protocol step produces for a peer cost one
// write and wake the receiver once. Each envelope is still encoded, counted,
// dropped (T1) and refused (T3) on its own, and per-sender order (T2) covers
// the batch as if each had been sent in turn. A batch is no new wire
// format: every version's receiver reads a pb.Batch of several envelopes.
type Batcher interface {
	// SendBatch is Send for each of envs in order, queued at once. Envelopes
	// that cannot be encoded are left out and reported in the error; the
	// others are sent.
	SendBatch(to msg.Member, envs []msg.Envelope) error
}

// Reacher is the optional capability of a Transport to say whether a
// member's advertised address reaches the very process that sends as that
// member. A node that advertises an address where it cannot be reached (a
// typo, 127.0.0.1 on several hosts) would otherwise be agreed into the
// epoch by the Join it sends over its own working connections, and the keys
// the ring then gives it would answer nobody (H28 in docs/design.md). A
// transport that routes by node ID alone, as the in-memory one does, need
// not implement it: every address there reaches its node.
type Reacher interface {
	// Reached reports whether to.Addr has answered a connection of this
	// node's as the process that last connected to this node as to.ID.
	// It turns true only after something was sent to to (that is what
	// opens the connection), and may turn false again when to restarts.
	Reached(to msg.Member) bool
}

// SendAll sends envs to to through t, as one batch when t is a Batcher.
func SendAll(t Transport, to msg.Member, envs []msg.Envelope) error {
	if b, ok := t.(Batcher); ok && len(envs) > 1 {
		return b.SendBatch(to, envs)
	}
	var errs []error
	for _, env := range envs {
		if err := t.Send(to, env); err != nil {
			if errors.Is(err, ErrClosed) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
