package transport

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// Meta is what a node advertises through memberlist: enough for any member
// to address it and to check capabilities before an epoch includes it.
type Meta struct {
	// NodeID equals the node's memberlist name; a node whose meta names
	// another ID is ignored.
	NodeID msg.NodeID
	// StoreID identifies the node's durable store. A change under the same
	// NodeID is a different member (H17, H21).
	StoreID uint64
	// GRPCAddr is where the node's gRPC transport listens.
	GRPCAddr string
	// Version is the lock protocol version the node runs.
	Version uint32
}

// Member is the msg.Member that Meta describes.
func (m Meta) Member() msg.Member {
	return msg.Member{ID: m.NodeID, Store: m.StoreID, Addr: m.GRPCAddr, Version: m.Version}
}

// metaFormatV1 is the first byte of every encoded Meta. Rule for later
// formats: they keep v1's fields first, in v1's layout, and append; so a v1
// decoder reads a newer node's v1 fields and ignores the rest (whereas a v1
// encoding with trailing bytes is corrupt and refused).
const metaFormatV1 = 1

// EncodeMeta returns m's compact encoding: the format byte, then StoreID and
// Version as uvarints, then NodeID and GRPCAddr each as a uvarint length and
// bytes. It refuses an encoding over memberlist's MetaMaxSize (512 bytes).
func EncodeMeta(m Meta) ([]byte, error) {
	if len(m.NodeID) == 0 || len(m.NodeID) > pb.MaxIDLen || len(m.GRPCAddr) > pb.MaxAddrLen {
		return nil, fmt.Errorf("%w: NodeID %q (%d bytes, 1..%d) or GRPCAddr (%d bytes, at most %d) out of bounds",
			ErrBadMeta, m.NodeID, len(m.NodeID), pb.MaxIDLen, len(m.GRPCAddr), pb.MaxAddrLen)
	}
	b := make([]byte, 0, 1+10+5+2+len(m.NodeID)+2+len(m.GRPCAddr))
	b = append(b, metaFormatV1)
	b = binary.AppendUvarint(b, m.StoreID)
	b = binary.AppendUvarint(b, uint64(m.Version))
	b = binary.AppendUvarint(b, uint64(len(m.NodeID)))
	b = append(b, m.NodeID...)
	b = binary.AppendUvarint(b, uint64(len(m.GRPCAddr)))
	b = append(b, m.GRPCAddr...)
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: encoded meta has %d bytes, memberlist allows %d", ErrBadMeta, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// DecodeMeta parses EncodeMeta's output (see metaFormatV1 for newer formats).
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) == 0 || b[0] < metaFormatV1 {
		return Meta{}, fmt.Errorf("%w: no homelock meta format byte", ErrBadMeta)
	}
	format, r := b[0], b[1:]
	var m Meta
	var ok bool
	if m.StoreID, r, ok = uvarint(r); !ok {
		return Meta{}, fmt.Errorf("%w: bad StoreID", ErrBadMeta)
	}
	var v uint64
	if v, r, ok = uvarint(r); !ok || v > 1<<32-1 {
		return Meta{}, fmt.Errorf("%w: bad Version", ErrBadMeta)
	}
	m.Version = uint32(v)
	var id, addr []byte
	if id, r, ok = lenPrefixed(r, pb.MaxIDLen); !ok || len(id) == 0 {
		return Meta{}, fmt.Errorf("%w: bad NodeID", ErrBadMeta)
	}
	if addr, r, ok = lenPrefixed(r, pb.MaxAddrLen); !ok {
		return Meta{}, fmt.Errorf("%w: bad GRPCAddr", ErrBadMeta)
	}
	if format == metaFormatV1 && len(r) != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(r))
	}
	m.NodeID, m.GRPCAddr = msg.NodeID(id), string(addr)
	return m, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func lenPrefixed(b []byte, limit int) ([]byte, []byte, bool) {
	n, r, ok := uvarint(b)
	if !ok || n > uint64(limit) || n > uint64(len(r)) {
		return nil, b, false
	}
	return r[:n], r[n:], true
}
