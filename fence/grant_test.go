package fence

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGrantCanonicalRoundTrip(t *testing.T) {
	g := baseGrant("invoice-batch/2026-07-19", "worker-settlement-7", tok(37, 2, 8842))
	b, err := g.MarshalBinary()
	must.NoError(t, err)
	must.Equal(t, GrantSchema, string(b[2:2+len(GrantSchema)]), "schema tag first")
	got, err := DecodeGrant(b)
	must.NoError(t, err)
	must.Equal(t, g, got)

	// The largest grant the bounds allow encodes to exactly MaxGrantSize.
	long := func(n int) string { return strings.Repeat("x", n) }
	big := Grant{Resource: long(MaxResourceLen), Owner: long(MaxNameLen), RequestID: long(MaxNameLen),
		Lease: long(MaxNameLen), Token: tok(1, 1, 1), Domain: long(MaxNameLen), TTL: time.Second,
		Operation: long(MaxNameLen), Scope: ScopeNode}
	bb, err := big.MarshalBinary()
	must.NoError(t, err)
	must.Equal(t, MaxGrantSize, len(bb))
	_, err = DecodeGrant(bb)
	must.NoError(t, err)
}

func TestGrantRejects(t *testing.T) {
	valid := baseGrant("r", "o", tok(1, 1, 1))
	enc, _ := valid.MarshalBinary()
	for name, mod := range map[string]func(*Grant){
		"empty resource":  func(g *Grant) { g.Resource = "" },
		"empty owner":     func(g *Grant) { g.Owner = "" },
		"empty domain":    func(g *Grant) { g.Domain = "" },
		"empty operation": func(g *Grant) { g.Operation = "" },
		"zero token":      func(g *Grant) { g.Token = Token{} },
		"zero TTL":        func(g *Grant) { g.TTL = 0 },
		"negative TTL":    func(g *Grant) { g.TTL = -time.Second },
		"no scope":        func(g *Grant) { g.Scope = 0 },
		"bad scope":       func(g *Grant) { g.Scope = 3 },
		"long resource":   func(g *Grant) { g.Resource = strings.Repeat("r", MaxResourceLen+1) },
		"long owner":      func(g *Grant) { g.Owner = strings.Repeat("o", MaxNameLen+1) },
		"section token":   func(g *Grant) { g.Token.Section = 1 }, // a grant covers a delegation
	} {
		g := valid
		mod(&g)
		_, err := g.MarshalBinary()
		check.ErrorIs(t, err, ErrBadGrant, name)
	}

	schemaV2 := bytes.Replace(bytes.Clone(enc), []byte("lockGrant.v1"), []byte("lockGrant.v2"), 1)
	overlong := appendU16String(nil, GrantSchema)
	overlong = binary.BigEndian.AppendUint16(overlong, MaxResourceLen+1)
	overlong = append(overlong, bytes.Repeat([]byte("r"), MaxResourceLen+1)...)
	ttlOverflow := bytes.Clone(enc)
	// TTL sits 1 (scope) + 2+len("write") (operation) + 8 bytes from the end.
	binary.BigEndian.PutUint64(ttlOverflow[len(ttlOverflow)-1-7-8:], 1<<63)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"trailing byte":  append(bytes.Clone(enc), 0),
		"truncated":      enc[:len(enc)-1],
		"unknown schema": schemaV2,
		"over-long":      overlong,
		"ttl overflow":   ttlOverflow,
		"huge":           make([]byte, MaxGrantSize+1),
	} {
		_, err := DecodeGrant(b)
		check.ErrorIs(t, err, ErrBadGrant, name)
	}
	_, err := DecodeGrant(overlong)
	check.ErrorIs(t, err, ErrTooLarge, "over-long field is a bound error too")
}

func TestGrantRootIgnoresOnlyTTL(t *testing.T) {
	g := baseGrant("r", "o", tok(1, 1, 1))
	renewed := g
	renewed.TTL = time.Hour
	check.Equal(t, g.Root(), renewed.Root(), "a renewal keeps the operation root")
	d1, _ := g.Digest()
	d2, _ := renewed.Digest()
	check.True(t, d1 != d2, "but the signed digest covers TTL")
	for name, mod := range map[string]func(*Grant){
		"owner":   func(g *Grant) { g.Owner = "p" },
		"request": func(g *Grant) { g.RequestID = "other" },
		"lease":   func(g *Grant) { g.Lease = "other" },
		"token":   func(g *Grant) { g.Token.Counter++ },
		"issuer":  func(g *Grant) { g.IssuerEpoch++ },
		"domain":  func(g *Grant) { g.Domain = "b" },
		"scope":   func(g *Grant) { g.Scope = ScopeNode },
	} {
		h := g
		mod(&h)
		check.True(t, h.Root() != g.Root(), name)
	}
}

func TestKeyRingSignVerify(t *testing.T) {
	r := newRing(t)
	g := baseGrant("r", "o", tok(3, 1, 9))
	s, err := r.Sign(g)
	must.NoError(t, err)
	got, err := r.Verify(s)
	must.NoError(t, err)
	must.Equal(t, g, got)

	// Rotation: the newest key signs, the old one still verifies until retired.
	must.NoError(t, r.Add("k2", testSecret2))
	must.Equal(t, "k2", r.SigningKeyID())
	s2, err := r.Sign(g)
	must.NoError(t, err)
	check.True(t, !bytes.Equal(s, s2))
	_, err = r.Verify(s)
	must.NoError(t, err)
	must.NoError(t, r.Retire("k1"))
	_, err = r.Verify(s)
	check.ErrorIs(t, err, ErrBadGrant, "retired key verifies nothing")
	_, err = r.Verify(s2)
	check.NoError(t, err)
	check.ErrorIs(t, r.Add("k1", testSecret1), ErrBadKey, "retired IDs are not reused")
	check.ErrorIs(t, r.Add("k2", testSecret1), ErrBadKey, "duplicate ID")

	// A ring that does not hold the key refuses, as does a forger's key under
	// the right ID.
	other := NewKeyRing()
	must.NoError(t, other.Add("k2", attackerKey))
	forged, err := other.Sign(g)
	must.NoError(t, err)
	_, err = r.Verify(forged)
	check.ErrorIs(t, err, ErrBadGrant)
	_, err = NewKeyRing().Verify(s2)
	check.ErrorIs(t, err, ErrBadGrant)

	// Revocation refuses authentic grants of that issuer epoch.
	must.NoError(t, r.Revoke(g.IssuerEpoch))
	_, err = r.Verify(s2)
	check.ErrorIs(t, err, ErrRevoked)
	check.NotErrorIs(t, err, ErrBadGrant)
	h := g
	h.IssuerEpoch = 5
	s3, _ := r.Sign(h)
	_, err = r.Verify(s3)
	check.NoError(t, err)
	r.RevokeBelow(6)
	_, err = r.Verify(s3)
	check.ErrorIs(t, err, ErrRevoked)
	check.True(t, r.IsRevoked(0) && !r.IsRevoked(6))

	must.NoError(t, r.Retire("k2"))
	_, err = r.Sign(g)
	check.ErrorIs(t, err, ErrNoSigningKey)
}

func TestKeyRingBounds(t *testing.T) {
	r := NewKeyRing()
	check.ErrorIs(t, r.Add("", testSecret1), ErrBadKey)
	check.ErrorIs(t, r.Add(strings.Repeat("k", MaxKeyIDLen+1), testSecret1), ErrBadKey)
	check.ErrorIs(t, r.Add("bad id", testSecret1), ErrBadKey)
	check.ErrorIs(t, r.Add("k", testSecret1[:MinSecretLen-1]), ErrBadKey)
	check.ErrorIs(t, r.Add("k", make([]byte, MaxSecretLen+1)), ErrBadKey)
	for i := range MaxKeys {
		must.NoError(t, r.Add(fmt.Sprintf("k%d", i), testSecret1))
	}
	check.ErrorIs(t, r.Add("one-more", testSecret1), ErrKeyRingFull)
	for e := range uint64(MaxRevokedEpochs) {
		must.NoError(t, r.Revoke(e+100))
	}
	check.ErrorIs(t, r.Revoke(1), ErrKeyRingFull)
	r.RevokeBelow(200)
	check.NoError(t, r.Revoke(1), "covered by the floor")
	check.NoError(t, r.Revoke(99999), "floor freed room")
	check.ErrorIs(t, r.Retire("nope"), ErrBadKey)

	big := make([]byte, MaxSignedGrantSize+1)
	_, err := r.Verify(big)
	check.ErrorIs(t, err, ErrTooLarge)
	check.ErrorIs(t, err, ErrBadGrant)
}

// A rolling key change (docs/operations.md, "Changing the grant signing
// key"): during each step nodes run either that step's ring file or the one
// before, and every grant one signs verifies on the other. The new key first
// goes in ahead of the old one, so it verifies but does not sign: the last
// key signs. Skipping that step leaves Guards that refuse the new key's
// grants.
func TestKeyRingRollingChange(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	k1 := fmt.Sprintf(`{"id": "k1", "secret": %q}`, b64(testSecret1))
	k2 := fmt.Sprintf(`{"id": "k2", "secret": %q}`, b64(testSecret2))
	steps := []struct{ file, signs string }{
		{`{"keys": [` + k1 + `]}`, "k1"},
		{`{"keys": [` + k2 + `, ` + k1 + `]}`, "k1"},
		{`{"keys": [` + k1 + `, ` + k2 + `]}`, "k2"},
		{`{"keys": [{"id": "k1", "retired": true}, ` + k2 + `]}`, "k2"},
	}
	rings := make([]*KeyRing, len(steps))
	for i, st := range steps {
		r, err := ParseKeyRing([]byte(st.file))
		must.NoError(t, err)
		must.Equal(t, st.signs, r.SigningKeyID(), "step %d", i)
		rings[i] = r
	}
	g := baseGrant("r", "o", tok(3, 1, 9))
	verifies := func(signer, verifier int) bool {
		s, err := rings[signer].Sign(g)
		must.NoError(t, err)
		_, err = rings[verifier].Verify(s)
		return err == nil
	}
	for i := 1; i < len(rings); i++ {
		check.True(t, verifies(i-1, i) && verifies(i, i-1), "steps %d and %d do not verify each other's grants", i-1, i)
	}
	check.False(t, verifies(2, 0), "a ring without the new key verified its grant")
}

func TestLoadKeyRing(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	file := fmt.Sprintf(`{
  "keys": [
    {"id": "k0", "retired": true},
    {"id": "k1", "secret": %q},
    {"id": "k2", "secret": %q}
  ],
  "revokedIssuerEpochs": [7],
  "revokedBelow": 2
}`, b64(testSecret1), b64(testSecret2))
	path := filepath.Join(t.TempDir(), "keys.json")
	must.NoError(t, os.WriteFile(path, []byte(file), 0o600))
	r, err := LoadKeyRing(path)
	must.NoError(t, err)
	check.Equal(t, "k2", r.SigningKeyID())
	check.True(t, r.IsRevoked(7) && r.IsRevoked(1) && !r.IsRevoked(2))
	check.ErrorIs(t, r.Add("k0", testSecret1), ErrBadKey)

	// The file's k1 verifies what a ring built by hand signs.
	s, _ := newRing(t).Sign(baseGrant("r", "o", tok(1, 1, 1), func(g *Grant) { g.IssuerEpoch = 3 }))
	_, err = r.Verify(s)
	check.NoError(t, err)

	for name, bad := range map[string]string{
		"unknown field":  `{"keys": [], "revoked": [1]}`,
		"trailing data":  `{"keys": []} {}`,
		"bad base64":     `{"keys": [{"id": "k", "secret": "!!"}]}`,
		"short secret":   fmt.Sprintf(`{"keys": [{"id": "k", "secret": %q}]}`, b64([]byte("short"))),
		"duplicate":      fmt.Sprintf(`{"keys": [{"id": "k", "secret": %q}, {"id": "k", "retired": true}]}`, b64(testSecret1)),
		"not json":       `keys: []`,
		"retired reused": fmt.Sprintf(`{"keys": [{"id": "k", "retired": true}, {"id": "k", "secret": %q}]}`, b64(testSecret1)),
	} {
		_, err := ParseKeyRing([]byte(bad))
		check.ErrorIs(t, err, ErrBadKey, name)
	}
	_, err = ParseKeyRing(make([]byte, MaxKeyRingFileSize+1))
	check.ErrorIs(t, err, ErrTooLarge)
	_, err = LoadKeyRing(filepath.Join(t.TempDir(), "missing.json"))
	check.True(t, err != nil && os.IsNotExist(unwrapAll(err)))
}

func unwrapAll(err error) error {
	for {
		type unwrapper interface{ Unwrap() error }
		u, ok := err.(unwrapper)
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestSignedGrantEveryByteMatters(t *testing.T) {
	r := newRing(t)
	s, err := r.Sign(baseGrant("r", "o", tok(1, 2, 3)))
	must.NoError(t, err)
	for i := range s {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			m := bytes.Clone(s)
			m[i] ^= mask
			_, err := r.Verify(m)
			check.ErrorIs(t, err, ErrBadGrant, "byte %d ^ %#x accepted", i, mask)
		}
	}
	for n := range len(s) {
		_, err := r.Verify(s[:n])
		check.ErrorIs(t, err, ErrBadGrant, "truncated to %d", n)
	}
	_, err = r.Verify(append(bytes.Clone(s), 0))
	check.ErrorIs(t, err, ErrBadGrant, "trailing byte")
}

// fuzzRing is the fixed ring the grant fuzzers verify against.
func fuzzRing() *KeyRing {
	r := NewKeyRing()
	_ = r.Add("k1", testSecret1)
	_ = r.Add("k2", testSecret2)
	return r
}

func fuzzSeeds() [][]byte {
	r := fuzzRing()
	var out [][]byte
	for _, g := range []Grant{
		baseGrant("r", "o", tok(1, 2, 3)),
		baseGrant("invoice-batch/2026-07-19", "worker-settlement-7", tok(37, 2, 8842), func(g *Grant) { g.Scope = ScopeNode; g.RequestID = "" }),
	} {
		s, _ := r.Sign(g)
		out = append(out, s)
		s, _ = r.signWith("k1", g)
		out = append(out, s)
	}
	return out
}

func FuzzGrantDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		// The canonical grant starts after magic, key ID and length.
		off := len(signedMagic) + 1 + int(s[len(signedMagic)]) + 2
		f.Add(s[off : len(s)-macSize])
		f.Add(s)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeGrant(b)
		if err != nil {
			return
		}
		// One grant, one encoding: what decodes re-encodes to the same bytes.
		e, err := g.MarshalBinary()
		if err != nil || !bytes.Equal(e, b) {
			t.Fatalf("decoded %+v re-encodes to %x (%v), input %x", g, e, err, b)
		}
	})
}

func FuzzGrantVerify(f *testing.F) {
	seeds := fuzzSeeds()
	for i, s := range seeds {
		f.Add(s, uint16(i), uint16(0), byte(0))
		f.Add(s, uint16(i), uint16(7), byte(1))
	}
	ring := fuzzRing()
	f.Fuzz(func(t *testing.T, data []byte, which, pos uint16, mask byte) {
		// Arbitrary bytes: no panic, and anything accepted is exactly the
		// signature the ring would produce for that grant under that key, so
		// no second byte string verifies as the same grant.
		if g, err := ring.Verify(data); err == nil {
			keyID := string(data[len(signedMagic)+1 : len(signedMagic)+1+int(data[len(signedMagic)])])
			again, err := ring.signWith(keyID, g)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("accepted %x, which is not the canonical signature %x (%v)", data, again, err)
			}
		}
		// Any change to a valid signed grant is refused.
		valid := seeds[int(which)%len(seeds)]
		if mask != 0 {
			m := bytes.Clone(valid)
			m[int(pos)%len(m)] ^= mask
			if _, err := ring.Verify(m); err == nil {
				t.Fatalf("byte %d ^ %#x of a valid grant verified", int(pos)%len(m), mask)
			}
		}
		// So are a truncation and an extension.
		if _, err := ring.Verify(valid[:int(pos)%len(valid)]); err == nil {
			t.Fatalf("truncation to %d verified", int(pos)%len(valid))
		}
		if _, err := ring.Verify(append(bytes.Clone(valid), data...)); err == nil && len(data) > 0 {
			t.Fatalf("extension by %d bytes verified", len(data))
		}
	})
}

func BenchmarkGrantVerify(b *testing.B) {
	r := newRing(b)
	s, _ := r.Sign(baseGrant("invoice-batch/2026-07-19", "worker-settlement-7", tok(37, 2, 8842)))
	for b.Loop() {
		if _, err := r.Verify(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrantSign is what signing costs a home at every grant it issues
// (on a first lock's path: docs/design.md, "Where a first remote lock's time
// goes").
func BenchmarkGrantSign(b *testing.B) {
	r := newRing(b)
	g := baseGrant("invoice-batch/2026-07-19", "worker-settlement-7", tok(37, 2, 8842))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Sign(g); err != nil {
			b.Fatal(err)
		}
	}
}
