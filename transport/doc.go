// Package transport is everything homelock puts on the wire: the protobuf
// messages (subpackage pb), the gRPC transport between processes, an
// in-memory transport with fault controls for tests, and membership with
// failure detection and capability advertisement over memberlist.
//
// It moves msg.Envelope values and makes no protocol decision: it does not
// retry, deduplicate, reorder or read bodies. The state machines tolerate
// loss, duplication and delay; what the transport promises is small:
//
//	T1  Send never blocks on the network. A full per-peer queue drops the
//	    envelope and counts it (Stats.Dropped).
//	T2  Per-sender order on one path. The envelopes one node sends to
//	    another over its own stream reach the Handler in the order Send
//	    accepted them, or not at all. Across a reconnect the receiver lets
//	    the newest stream from a node supersede the older one (receiver.go),
//	    so loss is possible there but reordering is not. Relayed envelopes
//	    (below) take another path and may overtake or trail those.
//	T3  Strict decoding. An envelope that this version does not fully
//	    understand is refused and counted (Stats.Refused), never half read
//	    (pb.Decode).
//	T4  Close stops every goroutine the transport started; no Handler call
//	    starts after Close returns. memberlist's Shutdown does not wait for
//	    its work in flight (a probe waiting out its interval, a push/pull
//	    until its TCP timeout), which then ends by itself; the tests'
//	    leakcheck waits for exactly that, and fails on anything else.
//
// # Threading
//
// Send, Stats and Close are safe for concurrent use. The Handler is called
// from transport goroutines: for one sender, sequentially and in order (T2);
// for different senders, possibly concurrently. It must return quickly (hand
// the envelope to the driver's loop): while it runs, nothing more from that
// sender is delivered. It may call Send, but not Close of its own transport,
// which waits for running Handlers.
//
// # gRPC
//
// NewGRPC listens on Config.ListenAddr. Each peer gets a bounded queue, a
// sender goroutine and one long-lived client stream (service Transport,
// rpc Stream); the sender writes whatever has queued as one Batch, so a
// burst costs one write and a lone envelope crosses loopback in tens of
// microseconds. SendBatch (the Batcher capability) queues several envelopes
// as one slot, so the messages one protocol step makes for a peer leave in
// one frame, whenever the sender goroutine wakes. Peers are dialled
// directly over TCP: HTTPS_PROXY and the like do not apply (gossip does
// not use them either, and the stall check reads each peer connection's
// own TCP state). A peer that is down is redialled with exponential backoff (ReconnectBase to ReconnectMax) while
// Send keeps queueing and dropping. Each process has a random boot ID that
// its streams carry both ways; when a stream comes in from a peer's process
// other than the one this node's own stream reached, the sender drops that
// stream and its connection before it writes again, so an answer to a
// restarted peer goes to the new process, not into the old connection
// (restart.go). The same boot IDs say whether a peer's advertised address
// reaches the peer itself (Reached, the Reacher capability): the boot that
// address answered with must be the one on the stream the peer has open to
// this node. Members let a joiner in only then (H28 in docs/design.md).
// TLS is optional; with a client certificate configured it is mutual.
//
// A sender that has had no open stream to a peer for RelayAfter (1 s by
// default; a node passes a quarter of its MaxLease), or whose stream the
// peer has acknowledged nothing on for RelayAfter while TCP retransmits (a
// cut drops packets; TCP_INFO, which the sender reads as it writes and
// while what it wrote waits for an acknowledgement, says so long before
// TCP's user timeout breaks the connection), also sends what it wrote
// since the peer's last acknowledgement, holds and queues for that peer
// through up to two other peers (rpc Relay), each of which writes it on
// its own stream to the addressee if that stream is open and answers as
// the addressee (relay.go, stall.go). What a
// node sends a peer whose envelopes came relayed within RelayAfter goes
// through relays too: the cut is most often both ways, and the answer
// must not wait for this node's own sender to notice. That keeps
// the keys two nodes cut from each other home lockable through the other in
// a partial partition, where membership keeps both. A relayed envelope is
// forwarded once; to the protocol it is a message delayed, duplicated or
// reordered, which the state machines take. A receiver of a release before
// relays answers Relay as unimplemented and forwards nothing.
//
// # In-memory
//
// Network and Endpoint implement the same interface within one process, with
// drop, delay, partition (symmetric and one way) and pause, documented on
// Network. Every envelope goes through pb.Encode and pb.Decode unless
// NetworkConfig.SkipCodec is set.
//
// # Membership
//
// Membership runs memberlist with this node's Meta (node ID, store ID, gRPC
// address, lock protocol version, safety timings). It reports members keyed by (node ID,
// store ID): a node that returns with another store ID reads as the old
// member down and a new one joined (hazard H21 in docs/design.md). It detects failures; it never
// decides membership, which epochs agree on. Gossip is encrypted with
// SecretKey, and AcceptKeys are also taken from others while a key changes;
// Plaintext's two middle steps let encryption be turned on or off the same
// way.
// memberlist runs with its LAN retransmit multiplier, so the node a joiner
// reaches tells every other member of a small cluster in one round (H29).
package transport
