package fence

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// GrantSchema is the schema tag that opens every canonical grant encoding.
// A decoder refuses any other tag, so a future lockGrant.v2 can never be read
// as a v1 grant with fields shifted.
const GrantSchema = "lockGrant.v1"

// Bounds on grant fields. A grant travels in every fenced mutation, so it is
// small; the bounds keep a hostile grant from costing more than a few KiB.
const (
	// MaxResourceLen bounds Grant.Resource and Mutation.Resource.
	MaxResourceLen = 1024
	// MaxNameLen bounds the other string fields of a grant and a mutation
	// (owner, request ID, lease, domain, operation, operation ID).
	MaxNameLen = 256
	// MaxGrantSize bounds a canonical grant encoding; it is the sum of the
	// field bounds and the fixed-width fields.
	MaxGrantSize = 2 + len(GrantSchema) + 2 + MaxResourceLen + 5*(2+MaxNameLen) + legacyTokenSize + 8 + 8 + 1
)

// Scope says what a grant's lock guarantees.
type Scope uint8

const (
	// ScopeCluster grants come from the cluster-wide lock service: mutual
	// exclusion across every node of the domain.
	ScopeCluster Scope = 1
	// ScopeNode grants come from a node-local lock (homelock's ScopeNode
	// fallback when the cluster cannot agree on a protocol version): they
	// exclude only lockers on one node and carry no cluster guarantee.
	ScopeNode Scope = 2
)

func (s Scope) String() string {
	switch s {
	case ScopeCluster:
		return "cluster"
	case ScopeNode:
		return "node"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

func (s Scope) valid() bool { return s == ScopeCluster || s == ScopeNode }

// Grant is lockGrant.v1: the lock service's statement that Owner holds the
// lock on Resource with Token. It is immutable once signed; the Guard accepts
// a mutation only under a grant that binds exactly the mutation's resource,
// owner and operation (F3).
type Grant struct {
	// Resource is the lock key, the resource's canonical ID.
	Resource string
	// Owner is the owner node's ID; the mutation's caller identity must equal
	// it.
	Owner string
	// RequestID identifies the acquisition, so a lost acquisition reply can be
	// answered with the same grant rather than a second one.
	RequestID string
	// Lease identifies the delegation the grant was issued under.
	Lease string
	// Token is the delegation's fence; never zero, and Section 0: the home
	// signs the delegation, and the holder numbers the critical sections
	// admitted under it without asking (Mutation.Section).
	Token Token
	// IssuerEpoch is the issuer's revocation epoch: revoking it on the key ring
	// refuses every grant the issuer signed in it.
	IssuerEpoch uint64
	// Domain is the lock domain (the cluster ID) whose order Token belongs to.
	// Tokens from different domains are not comparable (docs/design.md, "Fencing and the Guard").
	Domain string
	// TTL is the lease the issuer granted. The Guard does not enforce it (it
	// has no clock shared with the issuer); fencing makes a late writer
	// harmless instead.
	TTL time.Duration
	// Operation is the operation category the grant allows.
	Operation string
	// Scope is cluster or node.
	Scope Scope
}

// validate checks the fields both when encoding and after decoding, so Sign
// never produces a grant that Verify would refuse.
func (g *Grant) validate() error {
	check := func(field, v string, max int) error {
		if len(v) > max {
			return fmt.Errorf("%w: %w: grant %s has %d bytes, max %d", ErrBadGrant, ErrTooLarge, field, len(v), max)
		}
		return nil
	}
	for _, f := range [...]struct {
		name, v  string
		max      int
		required bool
	}{
		{"resource", g.Resource, MaxResourceLen, true},
		{"owner", g.Owner, MaxNameLen, true},
		{"request ID", g.RequestID, MaxNameLen, false},
		{"lease", g.Lease, MaxNameLen, false},
		{"domain", g.Domain, MaxNameLen, true},
		{"operation", g.Operation, MaxNameLen, true},
	} {
		if err := check(f.name, f.v, f.max); err != nil {
			return err
		}
		if f.required && f.v == "" {
			return fmt.Errorf("%w: grant %s is empty", ErrBadGrant, f.name)
		}
	}
	if g.Token.IsZero() {
		return fmt.Errorf("%w: grant token is zero", ErrBadGrant)
	}
	if g.Token.Section != 0 {
		return fmt.Errorf("%w: grant token %s names a section; a grant covers a delegation", ErrBadGrant, g.Token)
	}
	if g.TTL <= 0 {
		return fmt.Errorf("%w: grant TTL %v is not positive", ErrBadGrant, g.TTL)
	}
	if !g.Scope.valid() {
		return fmt.Errorf("%w: grant scope %d is neither cluster nor node", ErrBadGrant, uint8(g.Scope))
	}
	return nil
}

// AppendCanonical appends the canonical lockGrant.v1 encoding of g to b:
// schema tag, then resource, owner, request ID, lease (uint16-length-prefixed),
// delegation token (24 bytes: epoch, incarnation, counter), issuer epoch (8), domain, TTL in nanoseconds (8),
// operation, scope (1), all big-endian, in this order.
func (g Grant) AppendCanonical(b []byte) ([]byte, error) {
	if err := g.validate(); err != nil {
		return b, err
	}
	return g.appendFields(b, g.TTL), nil
}

// MarshalBinary returns the canonical encoding of g.
func (g Grant) MarshalBinary() ([]byte, error) {
	return g.AppendCanonical(make([]byte, 0, 128+len(g.Resource)))
}

func (g *Grant) appendFields(b []byte, ttl time.Duration) []byte {
	b = appendU16String(b, GrantSchema)
	b = appendU16String(b, g.Resource)
	b = appendU16String(b, g.Owner)
	b = appendU16String(b, g.RequestID)
	b = appendU16String(b, g.Lease)
	b = appendDelegationToken(b, g.Token)
	b = binary.BigEndian.AppendUint64(b, g.IssuerEpoch)
	b = appendU16String(b, g.Domain)
	b = binary.BigEndian.AppendUint64(b, uint64(ttl))
	b = appendU16String(b, g.Operation)
	return append(b, byte(g.Scope))
}

// DecodeGrant decodes exactly one canonical lockGrant.v1 encoding. It refuses
// another schema tag, over-long or missing fields, and trailing bytes. It does
// not authenticate: use KeyRing.Verify for anything received.
func DecodeGrant(b []byte) (Grant, error) {
	if len(b) > MaxGrantSize {
		return Grant{}, fmt.Errorf("%w: %w: grant has %d bytes, max %d", ErrBadGrant, ErrTooLarge, len(b), MaxGrantSize)
	}
	d := decoder{b: b, what: "lockGrant", base: ErrBadGrant}
	if schema := d.bytes16("schema", len(GrantSchema)); d.err == nil && string(schema) != GrantSchema {
		d.fail("unknown schema %q", schema)
	}
	var g Grant
	g.Resource = d.string16("resource", MaxResourceLen)
	g.Owner = d.string16("owner", MaxNameLen)
	g.RequestID = d.string16("request ID", MaxNameLen)
	g.Lease = d.string16("lease", MaxNameLen)
	g.Token = d.delegationToken("token")
	g.IssuerEpoch = d.u64("issuer epoch")
	g.Domain = d.string16("domain", MaxNameLen)
	ttl := d.u64("TTL")
	g.Operation = d.string16("operation", MaxNameLen)
	g.Scope = Scope(d.u8("scope"))
	if err := d.finish(); err != nil {
		return Grant{}, err
	}
	if ttl > math.MaxInt64 {
		return Grant{}, fmt.Errorf("%w: grant TTL %d ns overflows", ErrBadGrant, ttl)
	}
	g.TTL = time.Duration(ttl)
	if err := g.validate(); err != nil {
		return Grant{}, err
	}
	return g, nil
}

// Digest is SHA-256 of the canonical encoding: what the key ring MACs. It
// reports an error for a grant that does not validate.
func (g Grant) Digest() ([32]byte, error) {
	var buf [256]byte
	b, err := g.AppendCanonical(buf[:0])
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// Root is the grant's operation root: SHA-256 over the canonical encoding with
// TTL zeroed. Every segment written under one grant shares it, and the Guard
// records it with the highest fence. TTL is left out so that a grant re-signed
// with a longer lease (a renewal) keeps its root and its segments continue; any
// other difference (owner, request, lease, issuer epoch, domain) is a different
// grant, and one token under two roots means the issuer minted it twice.
func (g Grant) Root() [32]byte {
	var buf [256]byte
	h := sha256.New()
	h.Write([]byte("homelock operation root v1\x00"))
	h.Write(g.appendFields(buf[:0], 0))
	var out [32]byte
	h.Sum(out[:0])
	return out
}
