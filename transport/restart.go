package transport

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// A peer that restarts at the address it had is reached again through a
// new connection, but this node may not have noticed yet that the old one
// is gone: its end (a FIN, a reset) is read by gRPC's reader goroutine,
// which the restarted peer's first stream can beat. A message handed to
// the old stream in between is written, raises no error and is lost, and
// the protocol resends it only after RetryInterval: a home restarted under
// load waited 100 ms for a reclaim answer in 4 restarts of 125
// (docs/design.md, "Restarts and reclaim"). On a path that drops packets
// silently the old connection would stay open until the keepalive gave up.
//
// So each process has a boot ID that its streams carry both ways: the
// sender's in the stream's metadata, the receiver's in the header it
// answers with. When a peer's stream arrives from a boot other than the
// one this node's own stream to it reached, the sender drops that stream
// and its connection before it writes again: anything sent after the
// restarted peer was heard from goes on a new connection, to the new
// process. A peer of an earlier release sends no boot and sees no change.

// bootMetadataKey carries a process's boot ID: in a stream's metadata from
// its sender, and in the receiver's header.
const bootMetadataKey = "homelock-boot"

func newBoot() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

func formatBoot(b uint64) string { return strconv.FormatUint(b, 16) }

// parseBoot is the boot in a metadata value, 0 if there is none or it is
// malformed.
func parseBoot(v []string) uint64 {
	if len(v) != 1 {
		return 0
	}
	b, err := strconv.ParseUint(v[0], 16, 64)
	if err != nil {
		return 0
	}
	return b
}

// heardFrom records that from's process boot opened a stream to this node,
// for the sender of this node's messages to from.
func (g *GRPC) heardFrom(from msg.NodeID, boot uint64) {
	if boot == 0 {
		return
	}
	g.mu.RLock()
	p := g.peers[from]
	g.mu.RUnlock()
	if p != nil {
		p.heard.Store(boot)
	}
}

// Reached implements Reacher. The boot that to.Addr answered this node's
// latest stream with must be the boot of the process whose stream to this
// node as to.ID is open now: an address that accepts no stream (a typo)
// answers nothing, and one that reaches another process (another node's
// 127.0.0.1) answers with that process's boot. A process of a release
// before boots (2026-12-05) names none, so it is never shown reached.
func (g *GRPC) Reached(to msg.Member) bool {
	g.mu.RLock()
	p := g.peers[to.ID]
	g.mu.RUnlock()
	return p != nil && p.addr == to.Addr && g.answers(p)
}

// answers reports whether p's address answered with the boot of the
// process whose stream to this node as p.id is open now.
func (g *GRPC) answers(p *peer) bool {
	v, ok := g.senderBoots.Load(p.id)
	return ok && v.(uint64) != 0 && p.answer.Load() == v.(uint64)
}

// leaveGoneProcess reports whether st reached a process of the peer other
// than the one last heard from (0, unknown, on either side is no), and if
// so forgets that hearing: the sender then redials once, not before every
// write. Two live processes under one node ID (an impostor, which the
// protocol refuses) would otherwise have it redial for every frame, the
// one it reaches never being the one heard.
func (p *peer) leaveGoneProcess(st *stream) bool {
	heard, reached := p.heard.Load(), st.remote.Load()
	if heard == 0 || reached == 0 || heard == reached {
		return false
	}
	p.heard.CompareAndSwap(heard, 0)
	return true
}

// redial replaces the peer's connection: a new stream on the old one could
// still go to the gone process until gRPC notices its end.
func (p *peer) redial() {
	conn, err := p.g.dial(p.addr, p.dialer())
	if err != nil {
		p.log.Warn("transport: redial after the peer restarted", "err", err)
		return
	}
	_ = p.conn.Close()
	p.conn, p.client = conn, pb.NewTransportClient(conn)
}
