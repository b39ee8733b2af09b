package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
	"github.com/homelock/homelock/transport/pb"
)

type grpcNode struct {
	t    *GRPC
	self msg.Member
	in   *inbox
}

func newGRPCNode(t testing.TB, id msg.NodeID, mod func(*Config)) *grpcNode {
	t.Helper()
	n := &grpcNode{in: newInbox()}
	cfg := Config{NodeID: id, ListenAddr: "127.0.0.1:0", ReconnectMax: 100 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	g, err := NewGRPC(cfg, n.in.handle)
	require.NoError(t, err)
	n.t = g
	n.self = msg.Member{ID: id, Store: 1, Addr: g.Addr(), Version: 1}
	return n
}

func closeAll(t testing.TB, ts ...Transport) {
	for _, x := range ts {
		require.NoError(t, x.Close())
	}
}

// Three transports on loopback exchange every kind, each arriving equal to
// what was sent, and counted per kind on both sides.
func TestGRPCEveryKind(t *testing.T) {
	nodes := []*grpcNode{newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil), newGRPCNode(t, "c", nil)}
	defer func() {
		for _, n := range nodes {
			closeAll(t, n.t)
		}
	}()
	want := samples.Envelopes()
	for _, src := range nodes {
		for _, dst := range nodes {
			if src == dst {
				continue
			}
			for _, env := range want {
				env.From, env.To = src.self, dst.self.ID
				require.NoError(t, src.t.Send(dst.self, env))
			}
		}
	}
	for _, dst := range nodes {
		got := dst.in.waitLen(t, 2*len(want), 5*time.Second)
		for _, src := range nodes {
			if src == dst {
				continue
			}
			fromSrc := from(got, src.self.ID)
			require.Len(t, fromSrc, len(want))
			for i, env := range want {
				env.From, env.To = src.self, dst.self.ID
				require.Equal(t, env, fromSrc[i])
			}
		}
		// A sender counts after its stream write returns, which may be
		// after the receiver already has the envelopes.
		require.Eventually(t, func() bool { return dst.t.Stats().Sent.Msgs == uint64(2*len(want)) }, 5*time.Second, time.Millisecond)
		st := dst.t.Stats()
		require.Equal(t, uint64(2*len(want)), st.Received.Msgs)
		samplesOf := map[msg.Kind]uint64{}
		for _, env := range want {
			samplesOf[env.Body.Kind()]++
		}
		for _, k := range msg.Kinds() {
			require.Equal(t, 2*samplesOf[k], st.ByKind[k].Received.Msgs, k.String())
			require.Equal(t, 2*samplesOf[k], st.ByKind[k].Sent.Msgs, k.String())
			require.NotZero(t, st.ByKind[k].Received.Bytes, k.String())
		}
		require.Equal(t, st.Sent.Bytes, st.Received.Bytes, "symmetric traffic")
	}
}

// T2: two senders each send a numbered stream to one receiver from several
// goroutines' worth of bursts; each sender's envelopes arrive complete and in
// order.
func TestGRPCPerSenderOrder(t *testing.T) {
	const n = 3000
	a, b, c := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil), newGRPCNode(t, "c", nil)
	defer closeAll(t, a.t, b.t, c.t)
	var wg sync.WaitGroup
	for _, src := range []*grpcNode{a, b} {
		wg.Go(func() {
			for i := range n {
				require.NoError(t, src.t.Send(c.self, numbered(src.self, "c", uint64(i))))
				if i%500 == 0 {
					time.Sleep(time.Millisecond) // vary batch sizes
				}
			}
		})
	}
	wg.Wait()
	got := c.in.waitLen(t, 2*n, 10*time.Second)
	checkOrdered(t, from(got, "a"), true)
	checkOrdered(t, from(got, "b"), true)
}

// T1: with the peer down, Send returns at once, drops beyond the queue and
// counts the drops.
func TestGRPCSendNeverBlocksWhenPeerDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := lis.Addr().String()
	require.NoError(t, lis.Close())

	a := newGRPCNode(t, "a", func(c *Config) { c.QueueLen = 64 })
	defer closeAll(t, a.t)
	dead := msg.Member{ID: "dead", Addr: deadAddr}
	const n = 2000
	var slowest time.Duration
	for i := range n {
		start := time.Now()
		require.NoError(t, a.t.Send(dead, numbered(a.self, "dead", uint64(i))))
		slowest = max(slowest, time.Since(start))
	}
	// Generous for a shared machine under -race: a blocked Send would wait
	// for the redial backoff (ReconnectMax) at least.
	require.Less(t, slowest, 100*time.Millisecond, "Send blocked")
	st := a.t.Stats()
	require.GreaterOrEqual(t, st.Dropped, uint64(n-64-a.t.cfg.MaxBatch), "drops counted")
	require.Zero(t, st.Sent.Msgs)
}

// A peer that stops and restarts on the same address receives again: the
// sender notices the broken stream and reconnects with backoff.
func TestGRPCPeerRestart(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t)
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", 0)))
	b.in.waitLen(t, 1, 5*time.Second)

	addr := b.self.Addr
	require.NoError(t, b.t.Close())
	// While b is down, Send still returns at once.
	for i := 1; i <= 10; i++ {
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", uint64(i))))
	}

	b2 := newGRPCNode(t, "b", func(c *Config) { c.ListenAddr = addr })
	defer closeAll(t, b2.t)
	deadline := time.Now().Add(10 * time.Second)
	for i := uint64(11); b2.in.len() == 0; i++ {
		require.True(t, time.Now().Before(deadline), "restarted peer never received")
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", i)))
		time.Sleep(20 * time.Millisecond)
	}
	// Whatever survived the restart arrives in order, with gaps only.
	time.Sleep(50 * time.Millisecond)
	checkOrdered(t, b2.in.snapshot(), false)
	require.GreaterOrEqual(t, a.t.Stats().Reconnects, uint64(1))
}

// A receiver refuses and counts an envelope it cannot decode without losing
// the rest of the batch or the stream.
func TestGRPCRefusesBadEnvelope(t *testing.T) {
	b := newGRPCNode(t, "b", nil)
	defer closeAll(t, b.t)
	conn, err := grpc.NewClient("passthrough:///"+b.self.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	s, err := pb.NewTransportClient(conn).Stream(context.Background())
	require.NoError(t, err)
	good, err := pb.Encode(samples.Envelope(msg.Reclaim{}))
	require.NoError(t, err)
	require.NoError(t, s.Send(&pb.Batch{Envelopes: [][]byte{{0xff, 0xff}, good, {0x10, 0x03}, good}}))
	b.in.waitLen(t, 2, 5*time.Second)
	_, err = s.CloseAndRecv()
	require.NoError(t, err)
	require.Equal(t, uint64(2), b.t.Stats().Refused)
}

func TestGRPCSendRefusesUnencodable(t *testing.T) {
	a := newGRPCNode(t, "a", nil)
	require.ErrorIs(t, a.t.Send(a.self, msg.Envelope{Body: msg.RenewalAnswer{Result: 77}}), ErrBadEnum)
	require.NoError(t, a.t.Close())
	require.ErrorIs(t, a.t.Send(a.self, samples.Envelope(msg.Reclaim{})), ErrClosed)
}

func TestConfigValidate(t *testing.T) {
	err := Config{MaxMsgSize: 10, QueueLen: -1}.Validate()
	require.ErrorIs(t, err, ErrBadConfig)
	for _, field := range []string{"NodeID", "ListenAddr", "MaxMsgSize (10)", "QueueLen (-1)"} {
		require.Contains(t, err.Error(), field)
	}
	require.NoError(t, Config{NodeID: "a", ListenAddr: "127.0.0.1:0"}.Validate())
}

// BenchmarkGRPCOneWay is the latency of one envelope (an Acquire) across
// loopback: Send on one transport until the other's Handler has it.
func BenchmarkGRPCOneWay(b *testing.B) {
	got := make(chan struct{}, 1)
	recv, err := NewGRPC(Config{NodeID: "b", ListenAddr: "127.0.0.1:0"}, func(msg.Envelope) { got <- struct{}{} })
	require.NoError(b, err)
	send := newGRPCNode(b, "a", nil)
	defer closeAll(b, send.t, recv)
	to := msg.Member{ID: "b", Addr: recv.Addr()}
	env := samples.Envelope(samples.Bodies()[msg.KindAcquire-1])
	require.NoError(b, send.t.Send(to, env)) // connect
	<-got
	b.ReportAllocs()
	for b.Loop() {
		if err := send.t.Send(to, env); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}

// BenchmarkGRPCPingPong is a request and its reply: an Acquire to b, whose
// Handler answers with a Grant, until a's Handler has the Grant.
func BenchmarkGRPCPingPong(b *testing.B) {
	done := make(chan struct{}, 1)
	bodies := samples.Bodies()
	acquire, grant := samples.Envelope(bodies[msg.KindAcquire-1]), samples.Envelope(bodies[msg.KindGrant-1])
	var ta, tb *GRPC
	var aSelf msg.Member
	var err error
	ta, err = NewGRPC(Config{NodeID: "a", ListenAddr: "127.0.0.1:0"}, func(msg.Envelope) { done <- struct{}{} })
	require.NoError(b, err)
	aSelf = msg.Member{ID: "a", Addr: ta.Addr()}
	tb, err = NewGRPC(Config{NodeID: "b", ListenAddr: "127.0.0.1:0"}, func(msg.Envelope) {
		if err := tb.Send(aSelf, grant); err != nil {
			b.Error(err)
		}
	})
	require.NoError(b, err)
	defer closeAll(b, ta, tb)
	bSelf := msg.Member{ID: "b", Addr: tb.Addr()}
	require.NoError(b, ta.Send(bSelf, acquire))
	<-done
	b.ReportAllocs()
	for b.Loop() {
		if err := ta.Send(bSelf, acquire); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// HeardFrom says when each peer last reached this node, and keeps saying
// it after the peer's stream has ended (a peer cut off, or stopped).
func TestGRPCHeardFrom(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	defer closeAll(t, b.t)
	require.Empty(t, b.t.HeardFrom(), "heard from nobody yet")
	before := time.Now()
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", 0)))
	b.in.waitLen(t, 1, 5*time.Second)
	heard := b.t.HeardFrom()["a"]
	require.False(t, heard.Before(before), "heard %v, sent at %v", heard, before)
	require.False(t, heard.After(time.Now()))
	require.Len(t, b.t.HeardFrom(), 1)

	require.NoError(t, a.t.Close()) // its stream to b ends
	require.Eventually(t, func() bool {
		b.t.sendersMu.Lock()
		defer b.t.sendersMu.Unlock()
		return len(b.t.senders) == 0
	}, 5*time.Second, 10*time.Millisecond, "a's stream to b never ended")
	require.Equal(t, heard, b.t.HeardFrom()["a"], "the last time heard outlives the stream")
}

// TestGRPCHeardIsBounded: senders past maxHeard (any process can name
// itself anything) cost the oldest silent entry, never one with a stream
// open.
func TestGRPCHeardIsBounded(t *testing.T) {
	b := newGRPCNode(t, "b", nil)
	defer closeAll(t, b.t)
	open, gen := b.t.claimSlot("talking", 0)
	open.heard.Store(1) // heard from longest ago, but its stream is open
	for i := range maxHeard + 10 {
		from := msg.NodeID(fmt.Sprintf("n%d", i))
		slot, gen := b.t.claimSlot(from, 0)
		slot.heard.Store(int64(100 + i))
		b.t.releaseSlot(from, slot, gen)
	}
	heard := b.t.HeardFrom()
	has := func(id msg.NodeID) bool { _, ok := heard[id]; return ok }
	require.Len(t, heard, maxHeard)
	require.True(t, has("talking"), "the sender with a stream open was forgotten")
	for i := range 11 { // "talking" took a place: 11 went
		require.False(t, has(msg.NodeID(fmt.Sprintf("n%d", i))), "n%d, among the longest silent, is still kept", i)
	}
	require.True(t, has("n11"), "n11 was forgotten before older ones")
	require.True(t, has(msg.NodeID(fmt.Sprintf("n%d", maxHeard+9))), "the newest sender was forgotten")
	b.t.releaseSlot("talking", open, gen)
}
