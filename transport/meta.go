package transport

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

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
	// Timings are the node's safety timings (format v2; zero from a v1
	// node): a node that sees a peer advertise others fails its cluster
	// locks closed (docs/design.md, H26).
	Timings msg.Timings
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

// metaFormatV2 appends the Timings: EpochLease, MaxLease and Skew as
// uvarint nanoseconds, then MaxDrift's IEEE 754 bits as 8 bytes big-endian.
const metaFormatV2 = 2

// EncodeMeta returns m's compact encoding: the format byte, then StoreID and
// Version as uvarints, then NodeID and GRPCAddr each as a uvarint length and
// bytes, then the Timings (metaFormatV2). It refuses negative timings and an
// encoding over memberlist's MetaMaxSize (512 bytes).
func EncodeMeta(m Meta) ([]byte, error) {
	if len(m.NodeID) == 0 || len(m.NodeID) > pb.MaxIDLen || len(m.GRPCAddr) > pb.MaxAddrLen {
		return nil, fmt.Errorf("%w: NodeID %q (%d bytes, 1..%d) or GRPCAddr (%d bytes, at most %d) out of bounds",
			ErrBadMeta, m.NodeID, len(m.NodeID), pb.MaxIDLen, len(m.GRPCAddr), pb.MaxAddrLen)
	}
	t := m.Timings
	if t.EpochLease < 0 || t.MaxLease < 0 || t.Skew < 0 || !(t.MaxDrift >= 0 && t.MaxDrift < 1) {
		return nil, fmt.Errorf("%w: timings out of bounds: %s", ErrBadMeta, t)
	}
	b := make([]byte, 0, 1+10+5+2+len(m.NodeID)+2+len(m.GRPCAddr)+3*10+8)
	b = append(b, metaFormatV2)
	b = binary.AppendUvarint(b, m.StoreID)
	b = binary.AppendUvarint(b, uint64(m.Version))
	b = binary.AppendUvarint(b, uint64(len(m.NodeID)))
	b = append(b, m.NodeID...)
	b = binary.AppendUvarint(b, uint64(len(m.GRPCAddr)))
	b = append(b, m.GRPCAddr...)
	b = binary.AppendUvarint(b, uint64(t.EpochLease))
	b = binary.AppendUvarint(b, uint64(t.MaxLease))
	b = binary.AppendUvarint(b, uint64(t.Skew))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(t.MaxDrift))
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
	m.NodeID, m.GRPCAddr = msg.NodeID(id), string(addr)
	if format >= metaFormatV2 {
		if m.Timings, r, ok = decodeTimings(r); !ok {
			return Meta{}, fmt.Errorf("%w: bad Timings", ErrBadMeta)
		}
	}
	if format <= metaFormatV2 && len(r) != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(r))
	}
	return m, nil
}

// decodeTimings reads metaFormatV2's Timings, refusing what EncodeMeta
// would not write.
func decodeTimings(b []byte) (msg.Timings, []byte, bool) {
	var t msg.Timings
	for _, d := range []*time.Duration{&t.EpochLease, &t.MaxLease, &t.Skew} {
		v, r, ok := uvarint(b)
		if !ok || v > math.MaxInt64 {
			return msg.Timings{}, b, false
		}
		*d, b = time.Duration(v), r
	}
	if len(b) < 8 {
		return msg.Timings{}, b, false
	}
	t.MaxDrift = math.Float64frombits(binary.BigEndian.Uint64(b))
	if !(t.MaxDrift >= 0 && t.MaxDrift < 1) {
		return msg.Timings{}, b, false
	}
	return t, b[8:], true
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
