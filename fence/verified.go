package fence

import (
	"bytes"
	"hash/maphash"
	"sync"
)

// verifiedCache remembers grants this Guard verified, keyed by their exact
// signed bytes, so the many segments written under one grant pay for one
// MAC. A hit is the same bytes verified before under the same key ring
// generation (no key retired, no epoch revoked since), so it has the same
// outcome as verifying again (F3 unchanged).
//
// It is direct-mapped: a grant's bytes hash to one slot, and a grant that
// hashes to a taken slot replaces what was there. A store whose lock keys
// change hands often verifies a new grant on nearly every handoff, and a map
// keyed by the bytes cost such a write 2 to 3 µs in inserts, evictions and
// key copies alone; a slot keeps its buffers and is overwritten in place.
// Slots are made on first use, so a Guard that sees few grants keeps few.
type verifiedCache struct {
	mu    sync.Mutex
	seed  maphash.Seed    // the Guard's
	slots []*verifiedSlot // nil until the first grant; verifiedCacheSize long
}

type verifiedSlot struct {
	signed []byte // a copy of the verified bytes; empty: the slot is unused
	gen    uint64
	grant  Grant
	root   [32]byte
}

// verifiedCacheSize is the number of slots, a power of two.
const verifiedCacheSize = 4096

// verify returns the grant and its operation root.
func (c *verifiedCache) verify(r *KeyRing, signed []byte) (Grant, [32]byte, error) {
	gen := r.gen.Load()
	c.mu.Lock()
	i := c.index(signed)
	if s := c.slots[i]; s != nil && len(s.signed) > 0 && s.gen == gen && bytes.Equal(s.signed, signed) {
		g, root := s.grant, s.root
		c.mu.Unlock()
		return g, root, nil
	}
	c.mu.Unlock()
	g, err := r.Verify(signed)
	if err != nil {
		return Grant{}, [32]byte{}, err
	}
	root := g.Root()
	c.mu.Lock()
	s := c.slots[i]
	if s == nil {
		s = new(verifiedSlot)
		c.slots[i] = s
	}
	s.signed = append(s.signed[:0], signed...)
	s.gen, s.grant, s.root = gen, g, root
	c.mu.Unlock()
	return g, root, nil
}

// index is the slot for signed bytes; c.mu is held.
func (c *verifiedCache) index(signed []byte) uint64 {
	if c.slots == nil {
		c.slots = make([]*verifiedSlot, verifiedCacheSize)
	}
	return maphash.Bytes(c.seed, signed) & (verifiedCacheSize - 1)
}
