package transport

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// relayTrio is a partial partition on loopback: a and b each know the
// other at an address where nothing answers (as a cut that drops packets
// looks to a dialer), and both reach c, which reaches both.
func relayTrio(t *testing.T, relayAfter time.Duration) (a, b, c *grpcNode, bAtCut, aAtCut msg.Member) {
	t.Helper()
	mod := func(cfg *Config) { cfg.RelayAfter = relayAfter }
	a, b, c = newGRPCNode(t, "a", mod), newGRPCNode(t, "b", mod), newGRPCNode(t, "c", mod)
	t.Cleanup(func() { closeAll(t, a.t, b.t, c.t) })
	// Every pair but a-b opens its streams both ways, so each side's
	// address is shown to answer as it (Reached).
	for _, p := range [][2]*grpcNode{{a, c}, {b, c}, {c, a}, {c, b}} {
		require.NoError(t, p[0].t.Send(p[1].self, numbered(p[0].self, p[1].self.ID, 0)))
	}
	a.in.waitLen(t, 1, 5*time.Second)
	b.in.waitLen(t, 1, 5*time.Second)
	c.in.waitLen(t, 2, 5*time.Second)
	waitFor(t, 5*time.Second, "every link to and from c shown reached", func() bool {
		return c.t.Reached(a.self) && c.t.Reached(b.self) && a.t.Reached(c.self) && b.t.Reached(c.self)
	})
	bAtCut, aAtCut = b.self, a.self
	bAtCut.Addr, aAtCut.Addr = deafListener(t), deafListener(t)
	return a, b, c, bAtCut, aAtCut
}

// Envelopes between two nodes that cannot reach each other go through a
// third that reaches both, once the sender has had no stream for
// RelayAfter, and the answers come back the same way; the relay forwards
// nothing to itself and no envelope twice.
func TestGRPCRelaysAroundACut(t *testing.T) {
	a, b, c, bAtCut, aAtCut := relayTrio(t, 100*time.Millisecond)
	require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", 1)))
	waitFor(t, 5*time.Second, "a's sender to b stuck for RelayAfter", func() bool { return stuckFor(a.t, "b") > 100*time.Millisecond })
	for n := uint64(2); n <= 11; n++ {
		require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", n)))
	}
	require.Equal(t, map[msg.NodeID]bool{"b": true}, a.t.Relaying())
	require.Empty(t, c.t.Relaying())
	got := from(b.in.waitLen(t, 11, 5*time.Second), "a")
	require.Len(t, got, 10, "the ten envelopes sent after RelayAfter, through c")
	checkOrdered(t, got, false)
	require.Equal(t, uint64(2), got[0].Body.(msg.Renewal).Nonce, "the first, sent before RelayAfter, waits in a's queue for b")

	// b answers a, whom it cannot reach either: back through c.
	require.NoError(t, b.t.Send(aAtCut, numbered(b.self, "a", 1)))
	waitFor(t, 5*time.Second, "b's sender to a stuck for RelayAfter", func() bool { return stuckFor(b.t, "a") > 100*time.Millisecond })
	require.NoError(t, b.t.SendBatch(aAtCut, []msg.Envelope{numbered(b.self, "a", 2), numbered(b.self, "a", 3)}))
	require.Len(t, from(a.in.waitLen(t, 3, 5*time.Second), "b"), 2)

	sa, sb, sc := a.t.Stats(), b.t.Stats(), c.t.Stats()
	require.Equal(t, uint64(10), sa.Relayed)
	require.Equal(t, uint64(2), sb.Relayed)
	require.Equal(t, uint64(12), sc.Forwarded)
	require.Zero(t, sc.RelayDropped)
	require.Len(t, from(c.in.snapshot(), "a"), 1, "c delivers nothing it relays to itself")
	a.in.quiet(t, 3, 200*time.Millisecond)
	b.in.quiet(t, 11, 200*time.Millisecond)
}

// A node that receives a peer's envelopes through a relay answers that peer
// through relays too, at once, though its own stream to the peer looks
// open or has been stuck for less than RelayAfter: a cut is most often both
// ways, and an answer with half a lease to come back cannot wait for this
// node's own sender to notice. The window ends RelayAfter after the last
// relayed envelope, and a new address for the peer keeps it.
func TestGRPCAnswersRelayedEnvelopesThroughRelays(t *testing.T) {
	const relayAfter = time.Second
	mod := func(cfg *Config) { cfg.RelayAfter = relayAfter }
	a, b, c := newGRPCNode(t, "a", mod), newGRPCNode(t, "b", mod), newGRPCNode(t, "c", mod)
	defer closeAll(t, a.t, b.t, c.t)
	for _, p := range [][2]*grpcNode{{a, b}, {b, a}, {a, c}, {b, c}, {c, a}, {c, b}} {
		require.NoError(t, p[0].t.Send(p[1].self, numbered(p[0].self, p[1].self.ID, 0)))
	}
	a.in.waitLen(t, 2, 5*time.Second)
	b.in.waitLen(t, 2, 5*time.Second)
	c.in.waitLen(t, 2, 5*time.Second)
	waitFor(t, 5*time.Second, "every link shown reached", func() bool {
		return c.t.Reached(a.self) && c.t.Reached(b.self) && a.t.Reached(c.self) && b.t.Reached(c.self) && b.t.Reached(a.self)
	})

	// a is cut from b; b's stream to a still looks open.
	bAtCut := b.self
	bAtCut.Addr = deafListener(t)
	require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", 1)))
	waitFor(t, 5*time.Second, "a's sender to b stuck for RelayAfter", func() bool { return stuckFor(a.t, "b") > relayAfter })
	require.Empty(t, b.t.Relaying(), "b before anything came relayed")
	require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", 2)))
	require.Len(t, from(b.in.waitLen(t, 3, 5*time.Second), "a"), 2, "a's second envelope, through c")
	require.Zero(t, b.t.Stats().Relayed)

	// b answers on its open stream and through c: a gets it twice.
	require.Equal(t, map[msg.NodeID]bool{"a": true}, b.t.Relaying())
	require.NoError(t, b.t.Send(a.self, numbered(b.self, "a", 1)))
	require.Len(t, from(a.in.waitLen(t, 4, 5*time.Second), "b"), 3)
	require.Equal(t, uint64(1), b.t.Stats().Relayed)

	// RelayAfter after a's last relayed envelope, b's own sender decides
	// again: its envelope goes on its open stream alone.
	time.Sleep(relayAfter)
	require.Empty(t, b.t.Relaying())
	require.NoError(t, b.t.Send(a.self, numbered(b.self, "a", 2)))
	require.Len(t, from(a.in.waitLen(t, 5, 5*time.Second), "b"), 4)
	require.Equal(t, uint64(1), b.t.Stats().Relayed)

	// Relayed again, b answers a at a new address, whose stream it has not
	// had for RelayAfter: through c at once.
	require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", 3)))
	require.Len(t, from(b.in.waitLen(t, 4, 5*time.Second), "a"), 3)
	aAtCut := a.self
	aAtCut.Addr = deafListener(t)
	require.NoError(t, b.t.Send(aAtCut, numbered(b.self, "a", 3)))
	require.Len(t, from(a.in.waitLen(t, 6, 5*time.Second), "b"), 5)
	require.Less(t, stuckFor(b.t, "a"), relayAfter)
	require.Equal(t, uint64(2), b.t.Stats().Relayed)
	require.Equal(t, uint64(4), c.t.Stats().Forwarded)
	a.in.quiet(t, 6, 200*time.Millisecond)
}

// With RelayAfter negative a sender never relays: a stuck peer's envelopes
// wait in its queue, as before relays.
func TestGRPCRelayOff(t *testing.T) {
	a, b, c, bAtCut, _ := relayTrio(t, -1)
	for n := uint64(1); n <= 5; n++ {
		require.NoError(t, a.t.Send(bAtCut, numbered(a.self, "b", n)))
		time.Sleep(50 * time.Millisecond)
	}
	b.in.quiet(t, 1, 300*time.Millisecond)
	require.Empty(t, a.t.Relaying())
	require.Zero(t, a.t.Stats().Relayed)
	require.Zero(t, c.t.Stats().Forwarded)
}

// A relay forwards only to a peer whose open stream answers as that peer:
// not to one it has no stream to, and not to an address where another
// process answers (H28), so an envelope never lands on a process it was
// not for.
func TestGRPCRelayForwardsOnlyToAnsweringPeers(t *testing.T) {
	a, b, c, _, _ := relayTrio(t, 100*time.Millisecond)
	d, x := newGRPCNode(t, "d", nil), newGRPCNode(t, "x", nil)
	defer closeAll(t, d.t, x.t)
	// c knows d only at x's address: x answers there, not d.
	dAtX := d.self
	dAtX.Addr = x.self.Addr
	require.NoError(t, d.t.Send(c.self, numbered(d.self, "c", 0)))
	require.NoError(t, c.t.Send(dAtX, numbered(c.self, "d", 0)))
	x.in.waitLen(t, 1, 5*time.Second) // c's to "d", landed on x

	relay := rawRelay(t, c.self.Addr, "b")
	require.NoError(t, relay.Send(pbBatch(t,
		numbered(b.self, "d", 7),  // c's stream to d reaches x: dropped
		numbered(b.self, "e", 8),  // c has no stream to e: dropped
		numbered(b.self, "c", 9),  // addressed to the relay itself: refused
		numbered(a.self, "b", 10), // not from the relay stream's sender: refused
		numbered(b.self, "a", 11), // forwarded
	)))
	_, err := relay.CloseAndRecv()
	require.NoError(t, err)
	got := from(a.in.waitLen(t, 2, 5*time.Second), "b")
	require.Len(t, got, 1)
	require.Equal(t, uint64(11), got[0].Body.(msg.Renewal).Nonce)
	s := c.t.Stats()
	require.Equal(t, uint64(1), s.Forwarded)
	require.Equal(t, uint64(2), s.RelayDropped)
	require.Equal(t, uint64(2), s.Refused)
	require.Len(t, from(c.in.snapshot(), "b"), 1, "only b's first envelope to c reached c's handler")
	b.in.quiet(t, 1, 200*time.Millisecond)
	d.in.quiet(t, 0, 100*time.Millisecond)
	x.in.quiet(t, 1, 0)
}

// rawRelay opens a Relay call to addr naming sender as its node.
func rawRelay(t *testing.T, addr string, sender msg.NodeID) grpc.ClientStreamingClient[pb.Batch, pb.StreamSummary] {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), senderMetadataKey, string(sender))
	s, err := pb.NewTransportClient(conn).Relay(ctx)
	require.NoError(t, err)
	return s
}

func pbBatch(t *testing.T, envs ...msg.Envelope) *pb.Batch {
	t.Helper()
	b := &pb.Batch{}
	for _, env := range envs {
		data, err := pb.Encode(env)
		require.NoError(t, err)
		b.Envelopes = append(b.Envelopes, data)
	}
	return b
}

// stuckFor is how long g's sender to id has been without a stream.
func stuckFor(g *GRPC, id msg.NodeID) time.Duration {
	g.mu.RLock()
	p := g.peers[id]
	g.mu.RUnlock()
	if p == nil || p.stuckSince.Load() == 0 {
		return 0
	}
	return time.Since(time.Unix(0, p.stuckSince.Load()))
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}
