package fence

import (
	"errors"
	"testing"
)

// FuzzParseKeyRing: a key ring file is read at every start and on reload; a
// damaged one must be refused with the package's errors, never panic, and
// one that parses and can sign verifies what it signed (unless it revoked
// the issuer epoch).
func FuzzParseKeyRing(f *testing.F) {
	f.Add([]byte(`{"keys":[{"id":"k1","secret":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}]}`))
	f.Add([]byte(`{"keys":[{"id":"k0","retired":true},{"id":"k1","secret":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}],"revokedIssuerEpochs":[3,7],"revokedBelow":2}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"id":"k1","secret":"AAEC"}]} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseKeyRing(data)
		if err != nil {
			if !errors.Is(err, ErrBadKey) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrKeyRingFull) {
				t.Fatalf("ParseKeyRing(%q): %v, not one of the package's errors", data, err)
			}
			return
		}
		g := Grant{Resource: "r", Owner: "n1", Token: Token{Epoch: 9, Incarnation: 1, Counter: 1},
			IssuerEpoch: 9, Domain: "d", TTL: 1, Operation: "lock", Scope: ScopeCluster}
		signed, err := r.Sign(g)
		if err != nil {
			return // no active key, or the issuer epoch is revoked
		}
		got, err := r.Verify(signed)
		if errors.Is(err, ErrRevoked) {
			return // signing does not look at revocations; verifying does
		}
		if err != nil || got.Token != g.Token || got.Resource != g.Resource {
			t.Fatalf("the key ring %q does not verify its own grant: %+v, %v", data, got, err)
		}
	})
}
