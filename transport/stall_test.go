package transport

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStallOf(t *testing.T) {
	for _, tc := range []struct {
		name           string
		unacked        uint32
		retransmits    uint8
		lastAckMillis  uint32
		silent         time.Duration
		retransmitting bool
	}{
		{"idle", 0, 0, 9000, 9 * time.Second, false},
		{"in flight, not yet timed out", 3, 0, 9000, 9 * time.Second, false},
		{"a timeout, then the data acknowledged", 0, 1, 50, 50 * time.Millisecond, false},
		{"retransmitting", 2, 1, 1500, 1500 * time.Millisecond, true},
		{"retransmitting for long", 1, 4, 2900, 2900 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silent, retransmitting := stallOf(tc.unacked, tc.retransmits, tc.lastAckMillis)
			require.Equal(t, tc.silent, silent)
			require.Equal(t, tc.retransmitting, retransmitting)
		})
	}
}

func TestStallCheckEvery(t *testing.T) {
	require.Equal(t, 250*time.Millisecond, stallCheckEvery(time.Second))
	require.Equal(t, 250*time.Millisecond, stallCheckEvery(time.Minute))
	require.Equal(t, 100*time.Millisecond, stallCheckEvery(400*time.Millisecond))
	require.Equal(t, 50*time.Millisecond, stallCheckEvery(10*time.Millisecond))
}

// A peer is stalled since its last acknowledgement once TCP retransmits
// and that was RelayAfter ago; a reading without a retransmission, or with
// a younger silence, clears it; a failed reading or no connection leaves
// it as it was.
func TestCheckStall(t *testing.T) {
	tc := loopbackTCP(t)
	now := time.Unix(1_000, 0)
	earlier := now.Add(-time.Minute).UnixNano()
	type reading struct {
		silent         time.Duration
		retransmitting bool
		ok             bool
	}
	for _, c := range []struct {
		name   string
		sock   bool
		read   reading
		before int64
		after  int64
	}{
		{"stalls", true, reading{3 * time.Second, true, true}, 0, now.Add(-3 * time.Second).UnixNano()},
		{"stays stalled since it began", true, reading{3 * time.Second, true, true}, earlier, earlier},
		{"exactly RelayAfter", true, reading{time.Second, true, true}, 0, now.Add(-time.Second).UnixNano()},
		{"retransmitting, not yet RelayAfter", true, reading{900 * time.Millisecond, true, true}, earlier, 0},
		{"answered again", true, reading{3 * time.Second, false, true}, earlier, 0},
		{"reading failed", true, reading{3 * time.Second, true, false}, earlier, earlier},
		{"no connection", false, reading{3 * time.Second, true, true}, earlier, earlier},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := func(*net.TCPConn) (time.Duration, bool, bool) {
				return c.read.silent, c.read.retransmitting, c.read.ok
			}
			p := &peer{g: &GRPC{cfg: Config{readStall: read}}}
			if c.sock {
				p.sock.Store(tc)
			}
			p.stalledSince.Store(c.before)
			p.checkStall(now, time.Second)
			require.Equal(t, c.after, p.stalledSince.Load())
		})
	}
}

func loopbackTCP(t *testing.T) *net.TCPConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	c, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// fakeStall reads the connections to one address as retransmitting and
// unanswered for a minute while on, and every other one as answered: what
// TCP_INFO shows of a link that a cut drops packets on, which loopback
// cannot be made to do without root.
type fakeStall struct {
	addr string
	on   atomic.Bool
}

func (f *fakeStall) read(tc *net.TCPConn) (time.Duration, bool, bool) {
	if f.on.Load() && tc.RemoteAddr().String() == f.addr {
		return time.Minute, true, true
	}
	return 0, false, true
}

// A stalled stream relays while it stays open: once the sender, writing
// to a peer whose connection TCP has been retransmitting on, unanswered,
// for RelayAfter, has read that, what it holds and what it is sent after
// goes on that stream and through a relay too, and stops going through the
// relay once a write finds the connection answered again. A stream that
// then breaks counts as stuck since the stall began, so the relaying goes
// on without a second RelayAfter.
func TestGRPCRelaysAroundAStall(t *testing.T) {
	b, c := newGRPCNode(t, "b", nil), newGRPCNode(t, "c", nil)
	stall := &fakeStall{addr: b.self.Addr}
	a := newGRPCNode(t, "a", func(cfg *Config) {
		cfg.RelayAfter = 100 * time.Millisecond
		cfg.readStall = stall.read
	})
	t.Cleanup(func() { closeAll(t, a.t, b.t, c.t) })
	for _, p := range [][2]*grpcNode{{a, b}, {a, c}, {b, a}, {b, c}, {c, a}, {c, b}} {
		require.NoError(t, p[0].t.Send(p[1].self, numbered(p[0].self, p[1].self.ID, 0)))
	}
	b.in.waitLen(t, 2, 5*time.Second)
	c.in.waitLen(t, 2, 5*time.Second)
	waitFor(t, 5*time.Second, "a's link to c and c's to b shown reached", func() bool {
		return a.t.Reached(c.self) && c.t.Reached(b.self)
	})

	// An idle sender reads nothing: the stall shows once a writes.
	stall.on.Store(true)
	time.Sleep(2 * stallCheckEvery(100*time.Millisecond))
	require.Empty(t, a.t.Relaying(), "a has written nothing to b since the stall")
	next := uint64(1)
	sendUntil := func(what string, ok func() bool) {
		t.Helper()
		waitFor(t, 5*time.Second, what, func() bool {
			require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", next)))
			next++
			return ok()
		})
	}
	// The first write since the stall finds it, and the sender relays what
	// it holds then: that envelope, which Send queued before the stall
	// was seen, goes on a's stream and through c.
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", next)))
	next++
	waitFor(t, 5*time.Second, "the envelope whose write found the stall, through c", func() bool { return c.t.Stats().Forwarded == 1 })
	require.True(t, a.t.Relaying()["b"])
	require.Zero(t, stuckFor(a.t, "b"), "a's stream to b is still open")
	relayed := a.t.Stats().Relayed
	require.Equal(t, uint64(1), relayed)
	for range 10 {
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", next)))
		next++
	}
	want := int(next) + int(relayed) + 10 // the first, 0, included
	got := from(b.in.waitLen(t, want+1, 5*time.Second), "a")
	require.Len(t, got, want, "each of the last ten on a's own stream and through c")
	require.Equal(t, relayed+10, a.t.Stats().Relayed)
	require.Equal(t, relayed+10, c.t.Stats().Forwarded)

	stall.on.Store(false)
	relayed += 10
	sent := next
	sendUntil("a no longer relaying to b", func() bool { return len(a.t.Relaying()) == 0 })
	// Until a write found the connection answered, what a sent went
	// through c too.
	more := a.t.Stats().Relayed - relayed
	require.LessOrEqual(t, more, next-sent)
	want += int(next-sent) + int(more)
	b.in.waitLen(t, want+1, 5*time.Second)
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", next)))
	next++
	b.in.waitLen(t, want+2, 5*time.Second)
	b.in.quiet(t, want+2, 200*time.Millisecond)
	require.Equal(t, relayed+more, a.t.Stats().Relayed, "nothing through c once the stall is over")

	// The stall again, and then b's process gone: a's sender, finding its
	// stream broken, is stuck since the stall's start, a minute ago.
	stall.on.Store(true)
	sendUntil("a relaying to b again", func() bool { return a.t.Relaying()["b"] })
	require.NoError(t, b.t.Close())
	// The sender finds the stream broken when it next has one to write.
	sendUntil("a's sender to b stuck", func() bool { return stuckFor(a.t, "b") > 0 })
	require.Greater(t, stuckFor(a.t, "b"), 50*time.Second)
}
