package transport

import (
	"context"
	"net"
	"time"
)

// A cut rarely breaks a stream at once: the sender's writes land in the
// socket's buffer, TCP retransmits them unanswered, and only the user
// timeout (KeepaliveTimeout, 3 s) ends the connection. Until then the
// sender has an open stream and would not relay, so relays would start
// KeepaliveTimeout + RelayAfter into the cut. So the sender reads its
// connection's TCP state as it writes, at most every stallCheckEvery: a
// connection that TCP is retransmitting on, whose peer has acknowledged
// nothing for RelayAfter, is stalled, and a stalled peer's envelopes go
// through relays as a stuck one's do. A slow reader is not stalled (its
// kernel still acknowledges, with a closed window), nor is a paused
// process (its kernel answers for it), nor a lossy link that recovers. The
// check rides on the writes, not on a timer, so an idle node wakes for
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

// checkStallDue calls checkStall if the sender last did at least
// stallCheckEvery ago (*last; updated), and reports whether it found the
// peer newly stalled. Relay senders and a transport that does not relay
// never check.
func (p *peer) checkStallDue(last *time.Time) bool {
	if p.relay || p.g.cfg.RelayAfter < 0 {
		return false
	}
	now := time.Now()
	if now.Sub(*last) < stallCheckEvery(p.g.cfg.RelayAfter) {
		return false
	}
	*last = now
	return p.checkStall(now, p.g.cfg.RelayAfter)
}

// checkStall reads p's connection: stalled since its peer's last
// acknowledgement if TCP is retransmitting and that was RelayAfter ago or
// more; not stalled if TCP is not retransmitting or was answered since. A
// reading that fails (no connection yet, or it closed) changes nothing: the
// sender's own stuckSince takes over when it has to open a new stream. It
// reports whether p was not stalled before and is now.
func (p *peer) checkStall(now time.Time, relayAfter time.Duration) (newly bool) {
	tc := p.sock.Load()
	if tc == nil {
		return false
	}
	silent, retransmitting, ok := p.g.cfg.readStall(tc)
	if !ok {
		return false
	}
	if retransmitting && silent >= relayAfter {
		return p.stalledSince.CompareAndSwap(0, now.Add(-silent).UnixNano())
	}
	p.stalledSince.Store(0)
	return false
}

// troubledSince is when p's sender lost its stream or its stream stalled
// (Unix ns), 0 while its stream is open and answered.
func (p *peer) troubledSince() int64 {
	if since := p.stuckSince.Load(); since != 0 {
		return since
	}
	return p.stalledSince.Load()
}

// stallOf reads TCP_INFO's fields: unacked segments in flight, the
// retransmission timeouts since the last forward progress, and the
// milliseconds since the last acknowledgement.
func stallOf(unacked uint32, retransmits uint8, lastAckMillis uint32) (silent time.Duration, retransmitting bool) {
	return time.Duration(lastAckMillis) * time.Millisecond, unacked > 0 && retransmits > 0
}
