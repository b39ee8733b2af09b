package fence

import (
	"hash/maphash"
	"testing"
)

// The cache answers only for the exact bytes it verified: bytes that land
// in a slot holding another grant's, or in a slot never filled, are
// verified afresh.
func TestVerifiedCacheExactBytes(t *testing.T) {
	ring := newRing(t)
	a, err := ring.Sign(baseGrant(res, "A", tok(1, 1, 1)))
	must.NoError(t, err)
	c := verifiedCache{seed: maphash.MakeSeed()}
	g, root, err := c.verify(ring, a)
	must.NoError(t, err)
	check.Equal(t, tok(1, 1, 1), g.Token)
	check.Equal(t, g.Root(), root)

	// A forgery whose slot holds a's verification (planted there, as a
	// hash collision would put it) is refused, not read from the slot.
	forged := append([]byte(nil), a...)
	forged[len(forged)-1] ^= 1
	c.mu.Lock()
	hit := *c.slots[c.index(a)]
	c.slots[c.index(forged)] = &hit
	c.mu.Unlock()
	_, _, err = c.verify(ring, forged)
	check.ErrorIs(t, err, ErrBadGrant)

	// An unused slot (no bytes, generation 0) answers nothing, not even
	// for empty bytes.
	c.mu.Lock()
	c.slots[c.index(nil)] = &verifiedSlot{}
	c.mu.Unlock()
	_, _, err = c.verify(ring, nil)
	check.ErrorIs(t, err, ErrBadGrant)

	// Twice as many grants as slots, then the first ones again: whatever
	// the cache kept or replaced, every answer is what Verify says.
	var signed [][]byte
	for i := range 2 * verifiedCacheSize {
		s, err := ring.Sign(baseGrant(res, "A", tok(1, 1, uint64(i+2))))
		must.NoError(t, err)
		signed = append(signed, s)
		_, _, err = c.verify(ring, s)
		must.NoError(t, err)
	}
	for i, s := range signed[:64] {
		g, _, err := c.verify(ring, s)
		must.NoError(t, err)
		check.Equal(t, tok(1, 1, uint64(i+2)), g.Token)
	}
}
