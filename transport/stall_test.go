package transport

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

func TestStallOf(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unacked       uint32
		retransmits   uint8
		lastAckMillis uint32
		want          tcpState
	}{
		{"idle", 0, 0, 9000, tcpState{silent: 9 * time.Second}},
		{"in flight, not yet timed out", 3, 0, 9000, tcpState{silent: 9 * time.Second, outstanding: true}},
		{"a timeout, then the data acknowledged", 0, 1, 50, tcpState{silent: 50 * time.Millisecond}},
		{"retransmitting", 2, 1, 1500, tcpState{silent: 1500 * time.Millisecond, outstanding: true, retransmitting: true}},
		{"retransmitting for long", 1, 4, 2900, tcpState{silent: 2900 * time.Millisecond, outstanding: true, retransmitting: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, stallOf(tc.unacked, tc.retransmits, tc.lastAckMillis))
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
		silent                      time.Duration
		outstanding, retransmitting bool
		ok                          bool
	}
	for _, c := range []struct {
		name        string
		sock        bool
		read        reading
		before      int64
		after       int64
		newly       bool
		outstanding bool
	}{
		{"stalls", true, reading{3 * time.Second, true, true, true}, 0, now.Add(-3 * time.Second).UnixNano(), true, true},
		{"stays stalled since it began", true, reading{3 * time.Second, true, true, true}, earlier, earlier, false, true},
		{"exactly RelayAfter", true, reading{time.Second, true, true, true}, 0, now.Add(-time.Second).UnixNano(), true, true},
		{"retransmitting, not yet RelayAfter", true, reading{900 * time.Millisecond, true, true, true}, earlier, 0, false, true},
		{"in flight, not yet timed out", true, reading{3 * time.Second, true, false, true}, earlier, 0, false, true},
		{"answered again", true, reading{3 * time.Second, false, false, true}, earlier, 0, false, false},
		{"reading failed", true, reading{3 * time.Second, true, true, false}, earlier, earlier, false, false},
		{"no connection", false, reading{3 * time.Second, true, true, true}, earlier, earlier, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := func(*net.TCPConn) (tcpState, bool) {
				return tcpState{silent: c.read.silent, outstanding: c.read.outstanding, retransmitting: c.read.retransmitting}, c.read.ok
			}
			p := &peer{g: &GRPC{cfg: Config{readStall: read}}}
			if c.sock {
				p.sock.Store(tc)
			}
			p.stalledSince.Store(c.before)
			newly, outstanding := p.checkStall(now, time.Second)
			require.Equal(t, c.after, p.stalledSince.Load())
			require.Equal(t, c.newly, newly)
			require.Equal(t, c.outstanding, outstanding)
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

// fakeStall reads the connections to one address, while on, as
// retransmitting and unanswered since it was turned on, and every other one
// as answered: what TCP_INFO shows of a link that a cut drops packets on,
// which loopback cannot be made to do without root. A test turns it on
// once what was written before has been acknowledged (stallCheckEvery
// after the last write, the probe's turn).
type fakeStall struct {
	addr string
	on   atomic.Pointer[time.Time]
}

func (f *fakeStall) set(on bool) {
	if !on {
		f.on.Store(nil)
		return
	}
	now := time.Now()
	f.on.Store(&now)
}

func (f *fakeStall) read(tc *net.TCPConn) (tcpState, bool) {
	if since := f.on.Load(); since != nil && tc.RemoteAddr().String() == f.addr {
		return tcpState{silent: time.Since(*since), outstanding: true, retransmitting: true}, true
	}
	return tcpState{}, true
}

// stalledTrio starts nodes a, b and c, a's links to b read through stall,
// with every link open and shown reached; a relays after relayAfter.
func stalledTrio(t *testing.T, stall *fakeStall, relayAfter time.Duration) (a, b, c *grpcNode) {
	t.Helper()
	b, c = newGRPCNode(t, "b", nil), newGRPCNode(t, "c", nil)
	stall.addr = b.self.Addr
	a = newGRPCNode(t, "a", func(cfg *Config) {
		cfg.RelayAfter = relayAfter
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
	// What a wrote is acknowledged, and its probe has looked.
	time.Sleep(2 * stallCheckEvery(relayAfter))
	return a, b, c
}

// A stalled stream relays while it stays open: once the sender, writing
// to a peer whose connection TCP has been retransmitting on, unanswered,
// for RelayAfter, has read that, what it holds and what it is sent after
// goes on that stream and through a relay too, and stops going through the
// relay once a write finds the connection answered again. A stream that
// then breaks counts as stuck since the stall began, so the relaying goes
// on without a second RelayAfter.
func TestGRPCRelaysAroundAStall(t *testing.T) {
	stall := &fakeStall{}
	a, b, c := stalledTrio(t, stall, 100*time.Millisecond)

	// An idle sender reads nothing: the stall shows once a writes.
	stall.set(true)
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
	waitFor(t, 5*time.Second, "the envelope whose write found the stall, through c", func() bool { return c.t.Stats().Forwarded >= 1 })
	require.True(t, a.t.Relaying()["b"])
	require.Zero(t, stuckFor(a.t, "b"), "a's stream to b is still open")
	// Once, or twice when Send, which queues before it looks, looked after
	// the sender had seen the stall.
	relayed := a.t.Stats().Relayed
	require.Contains(t, []uint64{1, 2}, relayed)
	for range 10 {
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", next)))
		next++
	}
	want := int(next) + int(relayed) + 10 // the first, 0, included
	got := from(b.in.waitLen(t, want+1, 5*time.Second), "a")
	require.Len(t, got, want, "each of the last ten on a's own stream and through c")
	require.Equal(t, relayed+10, a.t.Stats().Relayed)
	require.Equal(t, relayed+10, c.t.Stats().Forwarded)

	stall.set(false)
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
	// stream broken, is stuck since the stall's start.
	stall.set(true)
	began := time.Now()
	sendUntil("a relaying to b again", func() bool { return a.t.Relaying()["b"] })
	require.NoError(t, b.t.Close())
	// The sender finds the stream broken when it next has one to write.
	sendUntil("a's sender to b stuck", func() bool { return stuckFor(a.t, "b") > 0 })
	since := time.Since(began)
	// Stuck since the break would be RelayAfter short at least; the
	// millisecond is for the wall clock stuckFor reads against.
	require.GreaterOrEqual(t, stuckFor(a.t, "b"), since-time.Millisecond, "stuck since the stall began, not since the break")
}

// A stall that no later write meets is still seen, and what was written
// into it goes through a relay: a renewal written as a cut came, with
// nothing else for that peer until its retry, reaches the peer through c
// once the stall is RelayAfter old, with no further Send.
func TestGRPCRelaysWhatAStallSwallowed(t *testing.T) {
	stall := &fakeStall{}
	a, b, c := stalledTrio(t, stall, 100*time.Millisecond)

	stall.set(true)
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", 1)))
	waitFor(t, 5*time.Second, "the envelope written into the stall, through c", func() bool { return c.t.Stats().Forwarded >= 1 })
	require.True(t, a.t.Relaying()["b"])
	got := from(b.in.waitLen(t, 4, 5*time.Second), "a")
	nonces := map[uint64]int{}
	for _, e := range got {
		nonces[e.Body.(msg.Renewal).Nonce]++
	}
	require.Equal(t, 1, nonces[0], "only what was written since the stall began goes through c")
	require.GreaterOrEqual(t, nonces[1], 2, "1 on a's own stream and through c")
}

// A sender's log of what it wrote keeps the writes of the last keep, at
// most writtenMax of them, and gives back those since an acknowledgement
// less ackSlack.
func TestWrittenLog(t *testing.T) {
	ms := int64(time.Millisecond)
	env := func(n int) []outgoing { return []outgoing{{data: []byte{byte(n)}}} }
	ats := func(es []writtenEnvelope) []int64 {
		out := []int64{}
		for _, e := range es {
			out = append(out, e.at/ms)
		}
		return out
	}
	var w writtenLog
	for i, at := range []int64{0, 100, 200, 300, 1100} {
		w.add(env(i), at*ms, time.Second)
	}
	require.Equal(t, []int64{100, 200, 300, 1100}, ats(w.entries), "0 was written over a second before the last")
	require.Equal(t, []byte{1}, w.entries[0].o.data)
	for _, c := range []struct {
		since int64
		want  []int64
	}{
		{0, []int64{100, 200, 300, 1100}},
		{205, []int64{200, 300, 1100}}, // 200 is within ackSlack of it
		{211, []int64{300, 1100}},
		{1100, []int64{1100}},
		{1111, []int64{}},
	} {
		require.Equal(t, c.want, ats(w.since(c.since*ms)), "since %d ms", c.since)
	}

	var full writtenLog
	batch := make([]outgoing, writtenMax+10)
	for i := range batch {
		batch[i].data = []byte{byte(i)}
	}
	full.add(batch, 0, time.Second)
	require.Len(t, full.entries, writtenMax)
	require.Equal(t, []byte{10}, full.entries[0].o.data, "the oldest dropped first")
}
