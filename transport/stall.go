package transport

import (
	"cmp"
	"context"
	"net"
	"slices"
	"time"
)

// A cut rarely breaks a stream at once: the sender's writes land in the
// socket's buffer, TCP retransmits them unanswered, and only the user
// timeout (KeepaliveTimeout, 3 s) ends the connection. Until then the
// sender has an open stream and would not relay, so relays would start
// KeepaliveTimeout + RelayAfter into the cut. So the sender reads its
// connection's TCP state as it writes, at most every stallCheckEvery, and
// every stallCheckEvery while what it wrote waits for an acknowledgement
// (below): a connection that TCP is retransmitting on, whose peer has
// acknowledged nothing for RelayAfter, is stalled, and a stalled peer's
// envelopes go through relays as a stuck one's do. A slow reader is not
// stalled (its kernel still acknowledges, with a closed window), nor is a
// paused process (its kernel answers for it), nor a lossy link that
// recovers. No check runs on an idle connection, so an idle node wakes for
// nothing: a ticker reading every peer four times a second cost three
// loopback nodes 1.4 ms of CPU a second, idle.

// stallCheckEvery is how often a sender that keeps writing reads its
// connection: a quarter of RelayAfter, within [stallCheckMin,
// stallCheckMax], so a stall is seen at most that long after it is due, if
// the node sends the peer anything by then (a waiting Acquire is retried
// every RetryInterval).
func stallCheckEvery(relayAfter time.Duration) time.Duration {
	return min(max(relayAfter/4, stallCheckMin), stallCheckMax)
}

const (
	stallCheckMin = 50 * time.Millisecond
	stallCheckMax = 250 * time.Millisecond
)

// dialer is the peer connection's dialer: the one gRPC uses by default
// (keepalives left to the OS, which gRPC's keepalive pings make moot), and
// it keeps the connection in p.sock for the stall check. A new
// connection starts unstalled.
func (p *peer) dialer() func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if tc, ok := c.(*net.TCPConn); ok {
			p.sock.Store(tc)
			p.stalledSince.Store(0)
		}
		return c, err
	}
}

// checksStalls reports whether p's sender checks its connection for a
// stall: relay senders, a transport that does not relay and one with no
// TCP_INFO to read (ackSilence is nil off Linux) never do.
func (p *peer) checksStalls() bool {
	return !p.relay && p.g.cfg.RelayAfter >= 0 && p.g.cfg.readStall != nil
}

// checkStallDue calls checkStall if the sender last did at least
// stallCheckEvery ago (*last; updated), and reports whether it found the
// peer newly stalled.
func (p *peer) checkStallDue(last *time.Time) bool {
	if !p.checksStalls() {
		return false
	}
	now := time.Now()
	if now.Sub(*last) < stallCheckEvery(p.g.cfg.RelayAfter) {
		return false
	}
	*last = now
	newly, _ := p.checkStall(now, p.g.cfg.RelayAfter)
	return newly
}

// checkStall reads p's connection: stalled since its peer's last
// acknowledgement if TCP is retransmitting and that was RelayAfter ago or
// more; not stalled if TCP is not retransmitting or was answered since. A
// reading that fails (no connection yet, or it closed) changes nothing: the
// sender's own stuckSince takes over when it has to open a new stream. It
// reports whether p was not stalled before and is now, and whether data
// written on the connection waits for an acknowledgement.
func (p *peer) checkStall(now time.Time, relayAfter time.Duration) (newly, outstanding bool) {
	tc := p.sock.Load()
	if tc == nil {
		return false, false
	}
	st, ok := p.g.cfg.readStall(tc)
	if !ok {
		return false, false
	}
	if st.retransmitting && st.silent >= relayAfter {
		return p.stalledSince.CompareAndSwap(0, now.Add(-st.silent).UnixNano()), true
	}
	p.stalledSince.Store(0)
	return false, st.outstanding
}

// A check that rode only on writes saw a stall at the first write after
// TCP's first retransmission (200 ms at least): for a renewal written into
// a fresh cut, its retry a RetryInterval later, while the renewal itself
// stayed in the dead stream. So a sender keeps what it wrote for a while
// (writtenLog) and, while data it wrote waits for an acknowledgement,
// checks again every stallCheckEvery without a write (a timer that a write
// arms). A stall found either way relays, besides what the sender still
// holds, what it wrote since the peer's last acknowledgement: the renewal
// that met the cut goes through the relays as soon as the stall is seen.
// One the peer did receive arrives twice, as a relayed envelope may.

// writtenLog is a sender's record of the envelopes it wrote lately, oldest
// first: at most writtenMax, none older than its keep.
type writtenLog struct {
	entries []writtenEnvelope
}

type writtenEnvelope struct {
	at int64 // when it was written (Unix ns)
	o  outgoing
}

// writtenMax bounds a writtenLog: a busy link's older writes are dropped
// (they could only be relayed as duplicates or lost, as before the log).
const writtenMax = 512

// ackSlack is how much earlier than the peer's last acknowledgement, as
// TCP_INFO tells it (in milliseconds, counted in the kernel's ticks), a
// write still counts as possibly unacknowledged.
const ackSlack = 10 * time.Millisecond

// writtenKeep is how long a writtenLog keeps a write: a stall is seen at
// most about RelayAfter, TCP's first retransmission and a check interval
// after the write it stalls.
func writtenKeep(relayAfter time.Duration) time.Duration { return relayAfter + time.Second }

// add records batch as written at now, dropping what is older than keep
// or beyond writtenMax.
func (w *writtenLog) add(batch []outgoing, now int64, keep time.Duration) {
	for _, o := range batch {
		w.entries = append(w.entries, writtenEnvelope{at: now, o: o})
	}
	drop := max(len(w.entries)-writtenMax, 0)
	for drop < len(w.entries) && now-w.entries[drop].at > int64(keep) {
		drop++
	}
	clear(w.entries[:drop])
	w.entries = w.entries[drop:]
}

// since returns the envelopes written at since - ackSlack or later.
func (w *writtenLog) since(since int64) []writtenEnvelope {
	from := since - int64(ackSlack)
	i, _ := slices.BinarySearchFunc(w.entries, from, func(e writtenEnvelope, t int64) int { return cmp.Compare(e.at, t) })
	return w.entries[i:]
}

// relayUnanswered sends through relays what p's sender, newly stalled,
// wrote since the peer's last acknowledgement, and what it holds.
func (p *peer) relayUnanswered(written *writtenLog, pending []outgoing) {
	for _, e := range written.since(p.stalledSince.Load()) {
		p.g.relayIfStuck(p, e.o)
	}
	for _, o := range pending {
		p.g.relayIfStuck(p, o)
	}
}

// troubledSince is when p's sender lost its stream or its stream stalled
// (Unix ns), 0 while its stream is open and answered.
func (p *peer) troubledSince() int64 {
	if since := p.stuckSince.Load(); since != 0 {
		return since
	}
	return p.stalledSince.Load()
}

// tcpState is what the stall check reads of a connection.
type tcpState struct {
	// silent is how long ago the peer last acknowledged anything.
	silent time.Duration
	// outstanding: data written on it waits for an acknowledgement.
	outstanding bool
	// retransmitting: a retransmission timeout fired on that data (at
	// least 200 ms unanswered).
	retransmitting bool
}

// stallOf reads TCP_INFO's fields: unacked segments in flight, the
// retransmission timeouts since the last forward progress, and the
// milliseconds since the last acknowledgement.
func stallOf(unacked uint32, retransmits uint8, lastAckMillis uint32) tcpState {
	return tcpState{
		silent:         time.Duration(lastAckMillis) * time.Millisecond,
		outstanding:    unacked > 0,
		retransmitting: unacked > 0 && retransmits > 0,
	}
}
