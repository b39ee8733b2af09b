package fence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// The signed grant envelope:
//
//	magic "HLG\x01" | keyIDLen u8 | keyID | grantLen u16 | canonical grant | MAC (32)
//
// where MAC = HMAC-SHA256(secret, macContext | keyIDLen | keyID | SHA-256(canonical grant)).
// The envelope is exactly that long: trailing bytes are refused, so one grant
// signed by one key has exactly one signed form (HMAC is deterministic).
const (
	signedMagic = "HLG\x01"
	macSize     = sha256.Size
	// MaxSignedGrantSize bounds a signed grant; Verify refuses anything longer
	// before reading it.
	MaxSignedGrantSize = len(signedMagic) + 1 + MaxKeyIDLen + 2 + MaxGrantSize + macSize
)

// Sign returns the signed form of g under the ring's newest active key.
func (r *KeyRing) Sign(g Grant) ([]byte, error) {
	r.mu.RLock()
	var k *ringKey
	if len(r.keys) > 0 {
		k = r.keys[len(r.keys)-1]
	}
	r.mu.RUnlock()
	if k == nil {
		return nil, ErrNoSigningKey
	}
	return k.sign(g)
}

// signWith signs under a named active key; tests use it to hold a grant
// signed by a key that is later retired.
func (r *KeyRing) signWith(id string, g Grant) ([]byte, error) {
	r.mu.RLock()
	k := r.find(id)
	r.mu.RUnlock()
	if k == nil {
		return nil, fmt.Errorf("%w: key %q is not active", ErrBadKey, id)
	}
	return k.sign(g)
}

func (k *ringKey) sign(g Grant) ([]byte, error) {
	out := make([]byte, 0, len(signedMagic)+1+len(k.id)+2+128+len(g.Resource)+macSize)
	out = append(out, signedMagic...)
	out = append(out, byte(len(k.id)))
	out = append(out, k.id...)
	lenAt := len(out)
	out = append(out, 0, 0)
	out, err := g.AppendCanonical(out)
	if err != nil {
		return nil, err
	}
	canonical := out[lenAt+2:]
	binary.BigEndian.PutUint16(out[lenAt:], uint16(len(canonical)))
	digest := sha256.Sum256(canonical)
	var mac [macSize]byte
	k.mac(&digest, &mac)
	return append(out, mac[:]...), nil
}

// Verify authenticates a signed grant and returns it. It refuses (ErrBadGrant)
// an envelope that is malformed, over-long, signed by an unknown or retired
// key, or whose MAC does not match; the grant bytes are decoded only after the
// MAC matched. An authentic grant from a revoked issuer epoch is ErrRevoked.
func (r *KeyRing) Verify(signed []byte) (Grant, error) {
	if len(signed) > MaxSignedGrantSize {
		return Grant{}, fmt.Errorf("%w: %w: signed grant has %d bytes, max %d", ErrBadGrant, ErrTooLarge, len(signed), MaxSignedGrantSize)
	}
	d := decoder{b: signed, what: "signed grant", base: ErrBadGrant}
	if magic := d.take(len(signedMagic), "magic"); d.err == nil && string(magic) != signedMagic {
		d.fail("bad magic %q", magic)
	}
	keyID := d.take(int(d.u8("key ID length")), "key ID")
	canonical := d.bytes16("grant", MaxGrantSize)
	mac := d.take(macSize, "MAC")
	if err := d.finish(); err != nil {
		return Grant{}, err
	}
	r.mu.RLock()
	k := r.find(string(keyID))
	_, retired := r.retired[string(keyID)]
	r.mu.RUnlock()
	switch {
	case retired:
		return Grant{}, fmt.Errorf("%w: signed by retired key %q", ErrBadGrant, keyID)
	case k == nil:
		return Grant{}, fmt.Errorf("%w: signed by unknown key %q", ErrBadGrant, keyID)
	}
	digest := sha256.Sum256(canonical)
	var want [macSize]byte
	k.mac(&digest, &want)
	if !hmac.Equal(want[:], mac) {
		return Grant{}, fmt.Errorf("%w: MAC mismatch under key %q", ErrBadGrant, keyID)
	}
	g, err := DecodeGrant(canonical)
	if err != nil {
		return Grant{}, err
	}
	r.mu.RLock()
	revoked := r.isRevoked(g.IssuerEpoch)
	r.mu.RUnlock()
	if revoked {
		return Grant{}, fmt.Errorf("%w: issuer epoch %d: resource %q token %s", ErrRevoked, g.IssuerEpoch, g.Resource, g.Token)
	}
	return g, nil
}
