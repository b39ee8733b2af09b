package fence

import (
	"encoding/hex"
	"testing"
	"time"
)

// katSigned is katGrant signed under key "k2026-07" by this version, its MAC
// checked outside Go (Python's hmac: HMAC-SHA256 of the context string, the
// key ID's length, the key ID and the canonical grant's SHA-256). Any change
// to the canonical encoding, the envelope or the MAC construction fails this
// test: a Guard must keep accepting what homes of older versions sign during
// a rolling upgrade, and older Guards what newer homes sign.
const katSigned = "484c4701086b323032362d30370076000c6c6f636b4772616e742e76310018696e766f6963652d62617463682f323032362d30372d313900026e310004332e3137000b65342e69322e63392e7330000000000000000400000000000000020000000000000009000000000000000400066f7264657273000000007735940000046c6f636b01c8751e185f4d586f08a663f93c35d359310445ce21140dac4ca7aa3121188167"

// katRoot is katGrant's operation root (Grant.Root), also computed outside
// Go: SHA-256 of "homelock operation root v1\x00" and the canonical grant
// with its TTL zeroed. Guards store it beside every fence and receipt, so it
// must not change either.
const katRoot = "d11b92b9015f07d5e115b9af08a4810c80cf944e2baa5606b7711ba53afb111f"

func katGrant() Grant {
	return Grant{
		Resource: "invoice-batch/2026-07-19", Owner: "n1", RequestID: "3.17",
		Lease: "e4.i2.c9.s0", Token: Token{Epoch: 4, Incarnation: 2, Counter: 9},
		IssuerEpoch: 4, Domain: "orders", TTL: 2 * time.Second, Operation: "lock", Scope: ScopeCluster,
	}
}

func TestSignedGrantKnownAnswer(t *testing.T) {
	r := NewKeyRing()
	must.NoError(t, r.Add("k2026-07", []byte("0123456789abcdef0123456789abcdef")))
	got, err := r.Sign(katGrant())
	must.NoError(t, err)
	check.Equal(t, katSigned, hex.EncodeToString(got))
	want, err := hex.DecodeString(katSigned)
	must.NoError(t, err)
	g, err := r.Verify(want)
	must.NoError(t, err)
	check.Equal(t, katGrant(), g)
	root := g.Root()
	check.Equal(t, katRoot, hex.EncodeToString(root[:]))
}
