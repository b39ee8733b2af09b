package msg

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// NodeID names a node. It is chosen by the operator and stable across restarts.
type NodeID string

// Member is one node of an epoch. A member is the pair (ID, Store): the store
// ID is random and created with the node's durable store, so a wiped disk under
// a reused node ID is a different member (H17).
type Member struct {
	ID    NodeID
	Store uint64
	// Addr is where the member's transport listens (host:port for gRPC).
	Addr string
	// Version is the lock protocol version the member runs. Versions match
	// exactly or not at all; 0 means the member advertises none.
	Version uint32
}

// FormatStore is a store ID as logs, errors and status print it: 16 hex
// digits, so that one ID reads the same wherever it appears.
func FormatStore(id uint64) string { return fmt.Sprintf("%016x", id) }

// Same reports whether m and o are the same member: same node ID and same store.
func (m Member) Same(o Member) bool { return m.ID == o.ID && m.Store == o.Store }

// Caps are the epoch-wide capabilities that every member must agree on.
// Changing them is an epoch change, never a silent split of the ring.
type Caps struct {
	// Ring is the version of the ring's hash function and key encoding.
	Ring uint32
}

// RingV1 is rendezvous hashing with xxhash64 over the raw key bytes.
const RingV1 uint32 = 1

// Epoch is one agreed membership. Members are sorted by ID and IDs are unique.
type Epoch struct {
	Number  uint64
	Members []Member
	Caps    Caps
}

// Digest is a hash of the epoch's canonical encoding. Requests carry it so
// that two nodes that agree on a number but not on its value notice.
func (e Epoch) Digest() uint64 {
	var b []byte
	b = binary.BigEndian.AppendUint64(b, e.Number)
	b = binary.BigEndian.AppendUint32(b, e.Caps.Ring)
	for _, m := range e.Members {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.ID)))
		b = append(b, m.ID...)
		b = binary.BigEndian.AppendUint64(b, m.Store)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Addr)))
		b = append(b, m.Addr...)
		b = binary.BigEndian.AppendUint32(b, m.Version)
	}
	return xxhash.Sum64(b)
}

// Member returns the member with node ID id.
func (e Epoch) Member(id NodeID) (Member, bool) {
	// slices.BinarySearchFunc's search, written out: this runs several times
	// per protocol step, and the generic call with its closure costs more
	// than the search.
	lo, hi := 0, len(e.Members)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if e.Members[h].ID < id {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(e.Members) && e.Members[lo].ID == id {
		return e.Members[lo], true
	}
	return Member{}, false
}

// Has reports whether m (node ID and store ID) is a member of e.
func (e Epoch) Has(m Member) bool {
	got, ok := e.Member(m.ID)
	return ok && got.Store == m.Store
}

// Majority is the number of members that form a majority of e.
func (e Epoch) Majority() int { return len(e.Members)/2 + 1 }

// Clone returns a deep copy of e.
func (e Epoch) Clone() Epoch {
	e.Members = slices.Clone(e.Members)
	return e
}

// SortMembers sorts ms by node ID, as Epoch requires.
func SortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
}

// Ballot orders proposals for one agreement instance: by counter, then node ID.
type Ballot struct {
	Counter uint64
	Node    NodeID
}

// Compare orders ballots; the zero ballot is below every proposed one.
func (b Ballot) Compare(o Ballot) int {
	if c := cmp.Compare(b.Counter, o.Counter); c != 0 {
		return c
	}
	return cmp.Compare(b.Node, o.Node)
}

// IsZero reports whether b is the zero ballot (nothing promised or accepted).
func (b Ballot) IsZero() bool { return b == Ballot{} }

// Certificate proves that an epoch was chosen: Accepted replies for one ballot
// from distinct members forming a majority of the previous epoch (Prev).
type Certificate struct {
	Ballot Ballot
	// Acceptors are the members of Prev whose Accepted replies form the majority.
	Acceptors []Member
	// Prev is the epoch the new one was chosen in (for epoch 1, the configured
	// initial members as epoch 0). It lets a node that is further behind check
	// the majority.
	Prev Epoch
}
