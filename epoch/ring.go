package epoch

import (
	"github.com/cespare/xxhash/v2"

	"github.com/homelock/homelock/msg"
)

// Ring maps a key to its home: rendezvous hashing (RingV1: xxhash64 of the
// raw key bytes and of the node ID) over the epoch's members that advertise a
// lock protocol version (Version != 0; a member advertising none is no key's
// home). A membership change moves only the keys whose home changed. A Ring
// is immutable and safe for concurrent use.
//
// The hashing is github.com/dgryski/go-rendezvous's, computed in place
// (ring_test.go holds the two equal): its Lookup answers a node ID, which
// took a map lookup by string to turn into the member, on every key a home
// or a holder routes.
type Ring struct {
	e msg.Epoch
	// homes are the eligible members in epoch order, idHash the xxhash64 of
	// each one's node ID. Under a node ID listed twice, every entry is the
	// last member listed with it, as a map by node ID would have it.
	homes  []msg.Member
	idHash []uint64
}

// NewRing builds the ring of epoch e.
func NewRing(e msg.Epoch) *Ring {
	r := &Ring{e: e, homes: make([]msg.Member, 0, len(e.Members)), idHash: make([]uint64, 0, len(e.Members))}
	for _, mb := range e.Members {
		if mb.Version == 0 {
			continue
		}
		for i := range r.homes {
			if r.homes[i].ID == mb.ID {
				r.homes[i] = mb
			}
		}
		r.homes = append(r.homes, mb)
		r.idHash = append(r.idHash, xxhash.Sum64String(string(mb.ID)))
	}
	return r
}

// Home returns key's home; ok is false when no member is eligible. It does
// not allocate.
func (r *Ring) Home(key string) (msg.Member, bool) {
	if r == nil || len(r.homes) == 0 {
		return msg.Member{}, false
	}
	// The member whose ID's hash mixed with the key's is highest; the first
	// of equals.
	kh := xxhash.Sum64String(key)
	best, bestMix := 0, rendezvousMix(kh^r.idHash[0])
	for i, h := range r.idHash[1:] {
		if m := rendezvousMix(kh ^ h); m > bestMix {
			best, bestMix = i+1, m
		}
	}
	return r.homes[best], true
}

// rendezvousMix is go-rendezvous's xorshift-multiply mix of a key's hash
// with a node's.
func rendezvousMix(x uint64) uint64 {
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	return x * 2685821657736338717
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
