package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
)

type memNode struct {
	e    *Endpoint
	self msg.Member
	in   *inbox
}

func memNodes(t *testing.T, n *Network, ids ...msg.NodeID) []*memNode {
	t.Helper()
	var out []*memNode
	for _, id := range ids {
		m := &memNode{self: msg.Member{ID: id, Store: 1, Addr: "mem:" + string(id)}, in: newInbox()}
		var err error
		m.e, err = n.Endpoint(m.self, m.in.handle)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func (m *memNode) send(t *testing.T, to *memNode, nonce uint64) {
	t.Helper()
	require.NoError(t, m.e.Send(to.self, numbered(m.self, to.self.ID, nonce)))
}

// Every kind crosses the in-memory network through the codec, equal to what
// was sent, counted in bytes as on the wire.
func TestInmemEveryKindThroughCodec(t *testing.T) {
	net := NewNetwork(NetworkConfig{Seed: 1})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	want := samples.Envelopes()
	for _, env := range want {
		require.NoError(t, ns[0].e.Send(ns[1].self, env))
	}
	require.Equal(t, want, ns[1].in.waitLen(t, len(want), 5*time.Second))
	st := ns[1].e.Stats()
	require.Equal(t, uint64(len(want)), st.Received.Msgs)
	require.NotZero(t, st.Received.Bytes)
	require.Equal(t, ns[0].e.Stats().Sent, st.Received)

	// The codec refuses at Send what a wire would refuse.
	require.ErrorIs(t, ns[0].e.Send(ns[1].self, msg.Envelope{Body: msg.Refused{Reason: 9}}), ErrBadEnum)
}

func TestInmemSkipCodec(t *testing.T) {
	net := NewNetwork(NetworkConfig{SkipCodec: true})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	env := samples.Envelope(msg.Renewal{Nonce: 1})
	require.NoError(t, ns[0].e.Send(ns[1].self, env))
	require.Equal(t, env, ns[1].in.waitLen(t, 1, time.Second)[0])
	require.Zero(t, ns[1].e.Stats().Received.Bytes)
}

// SetDrop loses about the given fraction, counted as FaultDropped; what
// arrives is in order.
func TestInmemDrop(t *testing.T) {
	net := NewNetwork(NetworkConfig{Seed: 7})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	net.SetDrop("a", "b", 0.5)
	const n = 2000
	for i := range n {
		ns[0].send(t, ns[1], uint64(i))
	}
	require.Eventually(t, func() bool {
		return uint64(ns[1].in.len())+ns[0].e.Stats().FaultDropped == n
	}, 5*time.Second, time.Millisecond)
	got := ns[1].in.len()
	require.InDelta(t, n/2, got, n/10, "about half arrive")
	checkOrdered(t, ns[1].in.snapshot(), false)

	// The reverse link is untouched, and 0 removes the setting.
	ns[1].send(t, ns[0], 0)
	ns[0].in.waitLen(t, 1, time.Second)
	net.SetDrop("a", "b", 0)
	ns[0].send(t, ns[1], n)
	ns[1].in.waitLen(t, got+1, time.Second)
}

// SetDelay holds each envelope at least the minimum, and jitter never
// reorders a link; other links are not held up.
func TestInmemDelay(t *testing.T) {
	net := NewNetwork(NetworkConfig{Seed: 3})
	defer net.Close()
	ns := memNodes(t, net, "a", "b", "c")
	net.SetDelay("a", "b", 30*time.Millisecond, 60*time.Millisecond)
	start := time.Now()
	for i := range 200 {
		ns[0].send(t, ns[1], uint64(i))
	}
	ns[0].send(t, ns[2], 0)
	ns[2].in.waitLen(t, 1, time.Second)

	got := ns[1].in.waitLen(t, 200, 5*time.Second)
	checkOrdered(t, got, true)
	require.GreaterOrEqual(t, ns[1].in.at[0].Sub(start), 30*time.Millisecond)
	require.True(t, ns[2].in.at[0].Before(ns[1].in.at[0]), "a→c waited for a→b's delay")
}

// Partition cuts both ways between groups, leaves links inside a group, and
// Heal restores them.
func TestInmemPartition(t *testing.T) {
	net := NewNetwork(NetworkConfig{})
	defer net.Close()
	ns := memNodes(t, net, "a", "b", "c")
	a, b, c := ns[0], ns[1], ns[2]
	net.Partition([]msg.NodeID{"a"}, []msg.NodeID{"b", "c"})
	a.send(t, b, 0)
	b.send(t, a, 0)
	c.send(t, a, 0)
	b.send(t, c, 0)
	c.in.waitLen(t, 1, time.Second)
	a.in.quiet(t, 0, 50*time.Millisecond)
	b.in.quiet(t, 0, 0)
	require.Equal(t, uint64(1), a.e.Stats().FaultDropped)

	net.Heal()
	a.send(t, b, 1)
	b.send(t, a, 1)
	b.in.waitLen(t, 1, time.Second)
	a.in.waitLen(t, 1, time.Second)
}

// Block cuts one direction only.
func TestInmemOneWayPartition(t *testing.T) {
	net := NewNetwork(NetworkConfig{})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	a, b := ns[0], ns[1]
	net.Block("a", "b")
	a.send(t, b, 0)
	b.send(t, a, 0)
	a.in.waitLen(t, 1, time.Second)
	b.in.quiet(t, 0, 50*time.Millisecond)
	net.Heal()
	a.send(t, b, 1)
	require.Equal(t, uint64(1), b.in.waitLen(t, 1, time.Second)[0].Body.(msg.Renewal).Nonce)
}

// A cut applies at delivery: an envelope already delayed on the link when
// the partition is made does not cross it.
func TestInmemPartitionCatchesQueued(t *testing.T) {
	net := NewNetwork(NetworkConfig{})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	net.SetDelay("a", "b", 50*time.Millisecond, 50*time.Millisecond)
	ns[0].send(t, ns[1], 0)
	net.Partition([]msg.NodeID{"a"}, []msg.NodeID{"b"})
	ns[1].in.quiet(t, 0, 100*time.Millisecond)
}

// Pause holds everything to and from the node, queued in order, and Resume
// delivers it; other nodes keep talking meanwhile.
func TestInmemPauseResume(t *testing.T) {
	net := NewNetwork(NetworkConfig{})
	defer net.Close()
	ns := memNodes(t, net, "a", "b", "c")
	a, b, c := ns[0], ns[1], ns[2]
	net.Pause("b")
	for i := range 10 {
		a.send(t, b, uint64(i))
		b.send(t, a, uint64(i))
	}
	a.send(t, c, 0)
	c.in.waitLen(t, 1, time.Second)
	a.in.quiet(t, 0, 50*time.Millisecond)
	b.in.quiet(t, 0, 0)

	net.Resume("b")
	checkOrdered(t, b.in.waitLen(t, 10, time.Second), true)
	checkOrdered(t, a.in.waitLen(t, 10, time.Second), true)
}

// A full link queue drops at Send and counts it; Send never blocks.
func TestInmemQueueFullDrops(t *testing.T) {
	net := NewNetwork(NetworkConfig{QueueLen: 8})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	net.Pause("b")
	for i := range 100 {
		ns[0].send(t, ns[1], uint64(i))
	}
	dropped := ns[0].e.Stats().Dropped
	// 8 queued, and perhaps 1 already taken by the link goroutine.
	require.Contains(t, []uint64{100 - 8, 100 - 8 - 1}, dropped)
	net.Resume("b")
	checkOrdered(t, ns[1].in.waitLen(t, int(100-dropped), time.Second), false)
	ns[1].in.quiet(t, int(100-dropped), 20*time.Millisecond)
}

// An endpoint that closes and reattaches under its ID (a restart) receives
// again; a closed endpoint refuses Send and gets no Handler call.
func TestInmemRestart(t *testing.T) {
	net := NewNetwork(NetworkConfig{})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	_, err := net.Endpoint(ns[1].self, ns[1].in.handle)
	require.ErrorIs(t, err, ErrAddrInUse)
	require.NoError(t, ns[1].e.Close())
	require.ErrorIs(t, ns[1].e.Send(ns[0].self, numbered(ns[1].self, "a", 0)), ErrClosed)
	ns[0].send(t, ns[1], 0)
	ns[1].in.quiet(t, 0, 30*time.Millisecond)

	b2 := memNodes(t, net, "b")[0]
	ns[0].send(t, b2, 1)
	b2.in.waitLen(t, 1, time.Second)
}
