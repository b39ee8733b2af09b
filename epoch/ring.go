package epoch

import (
	"github.com/cespare/xxhash/v2"
	rendezvous "github.com/dgryski/go-rendezvous"

	"github.com/homelock/homelock/msg"
)

// Ring maps a key to its home: rendezvous hashing (RingV1: xxhash64 of the
// raw key bytes and of the node ID) over the epoch's members that advertise a
// lock protocol version (Version != 0; a member advertising none is no key's
// home). A membership change moves only the keys whose home changed. A Ring
// is immutable and safe for concurrent use.
type Ring struct {
	e       msg.Epoch
	rdv     *rendezvous.Rendezvous
	members map[string]msg.Member
}

// NewRing builds the ring of epoch e.
func NewRing(e msg.Epoch) *Ring {
	r := &Ring{e: e, members: make(map[string]msg.Member, len(e.Members))}
	ids := make([]string, 0, len(e.Members))
	for _, mb := range e.Members {
		if mb.Version == 0 {
			continue
		}
		ids = append(ids, string(mb.ID))
		r.members[string(mb.ID)] = mb
	}
	r.rdv = rendezvous.New(ids, xxhash.Sum64String)
	return r
}

// Home returns key's home; ok is false when no member is eligible. It does
// not allocate.
func (r *Ring) Home(key string) (msg.Member, bool) {
	if r == nil || len(r.members) == 0 {
		return msg.Member{}, false
	}
	mb, ok := r.members[r.rdv.Lookup(key)]
	return mb, ok
}

// Epoch returns the epoch the ring was built from.
func (r *Ring) Epoch() msg.Epoch { return r.e }

// Moved reports whether key's home differs between the two rings, by member
// identity (node ID and store: a node that came back with a new store is a
// new home, H17). A nil ring has no home for any key.
func Moved(old, new *Ring, key string) bool {
	a, aok := old.Home(key)
	b, bok := new.Home(key)
	if aok != bok {
		return true
	}
	return aok && !a.Same(b)
}
