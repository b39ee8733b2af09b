package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

func batchOf(self msg.Member, to msg.NodeID, from, n uint64) []msg.Envelope {
	var envs []msg.Envelope
	for i := range n {
		envs = append(envs, numbered(self, to, from+i))
	}
	return envs
}

// A batch leaves in one stream frame, in order, each envelope counted on its
// own; a batch larger than MaxBatch is split into frames, still in order.
func TestGRPCSendBatchOneFrame(t *testing.T) {
	a := newGRPCNode(t, "a", func(c *Config) { c.MaxBatch = 4 })
	b := newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t, b.t)

	require.NoError(t, a.t.SendBatch(b.self, batchOf(a.self, b.self.ID, 0, 3)))
	checkOrdered(t, b.in.waitLen(t, 3, 5*time.Second), true)
	require.Eventually(t, func() bool { return a.t.Stats().Sent.Msgs == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(1), a.t.Stats().Frames, "three envelopes ready together, one frame")

	// Ten more behind a single Send: MaxBatch 4 makes at least three frames
	// of them, and nothing is reordered across the split.
	require.NoError(t, a.t.Send(b.self, numbered(a.self, b.self.ID, 3)))
	require.NoError(t, a.t.SendBatch(b.self, batchOf(a.self, b.self.ID, 4, 10)))
	checkOrdered(t, b.in.waitLen(t, 14, 5*time.Second), true)
	require.Eventually(t, func() bool { return a.t.Stats().Sent.Msgs == 14 }, 5*time.Second, time.Millisecond)
	st := a.t.Stats()
	require.GreaterOrEqual(t, st.Frames, uint64(1+3))
	require.Equal(t, uint64(14), b.t.Stats().Received.Msgs)
}

// An envelope that cannot be encoded is left out of its batch and reported;
// the others go.
func TestSendBatchSkipsUnencodable(t *testing.T) {
	bad := msg.Envelope{Body: msg.RenewalAnswer{Result: 77}}
	t.Run("grpc", func(t *testing.T) {
		a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
		defer closeAll(t, a.t, b.t)
		envs := batchOf(a.self, b.self.ID, 0, 2)
		err := a.t.SendBatch(b.self, []msg.Envelope{envs[0], bad, envs[1]})
		require.ErrorIs(t, err, ErrBadEnum)
		checkOrdered(t, b.in.waitLen(t, 2, 5*time.Second), true)
		b.in.quiet(t, 2, 50*time.Millisecond)
	})
	t.Run("inmem", func(t *testing.T) {
		net := NewNetwork(NetworkConfig{Seed: 1})
		defer net.Close()
		ns := memNodes(t, net, "a", "b")
		envs := batchOf(ns[0].self, "b", 0, 2)
		err := ns[0].e.SendBatch(ns[1].self, []msg.Envelope{envs[0], bad, envs[1]})
		require.ErrorIs(t, err, ErrBadEnum)
		checkOrdered(t, ns[1].in.waitLen(t, 2, 5*time.Second), true)
		require.Equal(t, uint64(1), ns[0].e.Stats().Frames)
	})
}

// In memory a batch keeps the link's order with the sends around it, and
// each of its envelopes meets the link's faults on its own.
func TestInmemSendBatchOrderAndFaults(t *testing.T) {
	net := NewNetwork(NetworkConfig{Seed: 7})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	ns[0].send(t, ns[1], 0)
	require.NoError(t, SendAll(ns[0].e, ns[1].self, batchOf(ns[0].self, "b", 1, 5)))
	ns[0].send(t, ns[1], 6)
	checkOrdered(t, ns[1].in.waitLen(t, 7, 5*time.Second), true)
	require.Equal(t, uint64(3), ns[0].e.Stats().Frames)

	net.SetDrop("a", "b", 0.5)
	require.NoError(t, ns[0].e.SendBatch(ns[1].self, batchOf(ns[0].self, "b", 7, 200)))
	st := ns[0].e.Stats()
	require.Less(t, st.FaultDropped, uint64(200), "a batch is not lost as a whole")
	require.NotZero(t, st.FaultDropped)
	got := ns[1].in.waitLen(t, 7+int(200-st.FaultDropped), 5*time.Second)
	checkOrdered(t, got, false)
}

// SendAll falls back to Send on a transport without the capability.
func TestSendAllWithoutBatcher(t *testing.T) {
	net := NewNetwork(NetworkConfig{Seed: 1})
	defer net.Close()
	ns := memNodes(t, net, "a", "b")
	plain := struct{ Transport }{ns[0].e}
	require.NoError(t, SendAll(plain, ns[1].self, batchOf(ns[0].self, "b", 0, 4)))
	checkOrdered(t, ns[1].in.waitLen(t, 4, 5*time.Second), true)
	require.Equal(t, uint64(4), ns[0].e.Stats().Frames, "one Send each")
}
