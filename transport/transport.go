package transport

import "github.com/homelock/homelock/msg"

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
