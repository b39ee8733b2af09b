package fence

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The failure matrix of seed 000 ("Inject Pauses, Partitions, and Generation
// Regressions"), one test per item. Every refusal goes through
// fixture.refused, which also asserts F2 on a full dump of the store.

const res = "invoice-batch/2026-07-19"

// Worker A leases, pauses past its TTL, B takes over and writes; A resumes
// believing it holds the lock and writes its old result.
func TestMatrixOwnerPausedBeyondTTL(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a := f.grant(res, "A", tok(1, 1, 1))
	f.accepted(mut(a, res, "A", "a-1", 1, "A's first result"))
	// A pauses for two minutes; the lock service lets B in with a higher token.
	b := f.grant(res, "B", tok(1, 1, 2))
	f.accepted(mut(b, res, "B", "b-1", 1, "B's newer result"))
	// A resumes, still holding its grant, and writes its next segment.
	f.refused(mut(a, res, "A", "a-2", 2, "A's stale result"), ErrStaleOwner)
	check.Equal(t, "B's newer result", f.value("biz/"+res))
	check.Equal(t, tok(1, 1, 2), f.highest(res))
}

// A renewal whose reply is lost: either the home did renew (the holder goes
// on, possibly with a re-signed grant of longer TTL) or it did not and a new
// owner got in (the holder's writes are stale). Both must come out right
// without the holder knowing which happened.
func TestMatrixLostRenewalResponse(t *testing.T) {
	t.Run("renewed", func(t *testing.T) {
		f := newFixture(t, GuardOptions{})
		a := f.grant(res, "A", tok(1, 1, 1))
		f.accepted(mut(a, res, "A", "a-1", 1, "p1"))
		// The renewal took effect; the retried renewal's reply carries the
		// grant re-signed with a longer TTL. Same delegation, same root.
		renewed := f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.TTL = time.Minute })
		check.True(t, !bytes.Equal(a, renewed))
		f.accepted(mut(renewed, res, "A", "a-2", 2, "p2"))
		f.accepted(mut(a, res, "A", "a-3", 3, "p3"))
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t, GuardOptions{})
		a := f.grant(res, "A", tok(1, 1, 1))
		f.accepted(mut(a, res, "A", "a-1", 1, "p1"))
		// The renewal never reached the home: A's lease ran out, B got in.
		f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b-1", 1, "q1"))
		// A, in OWNERSHIP_UNKNOWN, had one write already in flight.
		f.refused(mut(a, res, "A", "a-2", 2, "p2"), ErrStaleOwner)
	})
}

// A releases, B acquires and writes, A reacquires; messages of every earlier
// tenure interleave with the later ones.
func TestMatrixInterleavedReleaseAndReacquire(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a1 := f.grant(res, "A", tok(1, 1, 1))
	b2 := f.grant(res, "B", tok(1, 1, 2))
	a3 := f.grant(res, "A", tok(1, 1, 3))
	f.accepted(mut(a1, res, "A", "a1-1", 1, "x"))
	// A releases; B acquires and writes one segment.
	f.accepted(mut(b2, res, "B", "b2-1", 1, "y"))
	// A reacquires with a new token before B's second segment lands.
	f.accepted(mut(a3, res, "A", "a3-1", 1, "z"))
	f.refused(mut(b2, res, "B", "b2-2", 2, "y2"), ErrStaleOwner)
	f.refused(mut(a1, res, "A", "a1-2", 2, "x2"), ErrStaleOwner)
	// A's first tenure's grant is A's too, but an older one: the owner being
	// equal does not make an old fence current.
	f.accepted(mut(a3, res, "A", "a3-2", 2, "z2"))
	check.Equal(t, "z2", f.value("biz/"+res))
}

func TestMatrixOutOfOrderSegments(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a := f.grant(res, "A", tok(1, 1, 1))
	f.refused(mut(a, res, "A", "s2", 2, "2"), ErrSegmentOrder) // a new fence starts at 1
	f.accepted(mut(a, res, "A", "s1", 1, "1"))
	f.refused(mut(a, res, "A", "s3", 3, "3"), ErrSegmentOrder) // 2 skipped
	f.accepted(mut(a, res, "A", "s2", 2, "2"))
	f.accepted(mut(a, res, "A", "s3", 3, "3"))
	// A new owner's first segment must be 1 even if it holds "later" numbers.
	b := f.grant(res, "B", tok(1, 1, 2))
	f.refused(mut(b, res, "B", "b4", 4, "4"), ErrSegmentOrder)
	// And the old owner's unused later segment is stale once B is in.
	f.accepted(mut(b, res, "B", "b1", 1, "b"))
	f.refused(mut(a, res, "A", "s4", 4, "4"), ErrStaleOwner)
}

func TestMatrixDuplicateSegment(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a := f.grant(res, "A", tok(1, 1, 1))
	r1 := f.accepted(mut(a, res, "A", "op-1", 1, "payload"))
	r2 := f.accepted(mut(a, res, "A", "op-2", 2, "payload-2"))
	before := dump(t, f.db, f.g.prefix)
	staged := false
	again, err := f.g.Apply(context.Background(), mut(a, res, "A", "op-1", 1, "payload"), func(*pebble.Batch) error {
		staged = true
		return nil
	})
	must.NoError(t, err)
	check.Equal(t, r1, again, "a duplicate gets its original receipt")
	check.False(t, staged, "a duplicate is not staged again")
	check.Equal(t, before, dump(t, f.db, f.g.prefix))
	check.Equal(t, uint64(1), r1.Seq)
	check.Equal(t, uint64(2), r2.Seq)
}

func TestMatrixDifferentPayloadSegment(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	ctx := context.Background()
	a := f.grant(res, "A", tok(1, 1, 1))
	rc := f.accepted(mut(a, res, "A", "op-1", 1, "original"))
	f.refused(mut(a, res, "A", "op-1", 1, "different"), ErrQuarantined)
	f.refused(mut(a, res, "A", "op-1x", 1, "original"), ErrQuarantined) // same bytes, other op
	f.refused(mut(a, res, "A", "op-1", 1, "different"), ErrQuarantined) // retried: logged once
	q, err := f.g.Quarantined(ctx, res)
	must.NoError(t, err)
	must.Len(t, q, 2)
	for _, x := range q {
		check.Equal(t, rc, x.Accepted)
		check.Equal(t, tok(1, 1, 1), x.Token)
		check.Equal(t, uint64(1), x.Segment)
	}
	all, err := f.g.Quarantined(ctx, "")
	must.NoError(t, err)
	check.Len(t, all, 2)
	check.Equal(t, "original", f.value("biz/"+res))
	must.NoError(t, f.g.ClearQuarantine(ctx, res))
	q, _ = f.g.Quarantined(ctx, res)
	check.Len(t, q, 0)
	f.accepted(mut(a, res, "A", "op-2", 2, "next")) // the fence is untouched
}

func TestQuarantineBound(t *testing.T) {
	f := newFixture(t, GuardOptions{MaxQuarantine: 2})
	a := f.grant(res, "A", tok(1, 1, 1))
	f.accepted(mut(a, res, "A", "op-1", 1, "original"))
	for _, p := range []string{"x", "y", "z"} {
		f.refused(mut(a, res, "A", "op-1", 1, p), ErrQuarantined)
	}
	q, err := f.g.Quarantined(context.Background(), "")
	must.NoError(t, err)
	check.Len(t, q, 2)
}

// A message sent under an old tenure is delayed in the network and arrives
// after the next owner wrote; it was never accepted, so no receipt vouches
// for it either.
func TestMatrixDelayedOldMessage(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a := f.grant(res, "A", tok(1, 1, 1))
	delayed := mut(a, res, "A", "a-1", 1, "old")
	f.accepted(mut(f.grant(res, "B", tok(1, 2, 1)), res, "B", "b-1", 1, "new"))
	f.refused(delayed, ErrStaleOwner)
	_, err := f.g.Receipt(context.Background(), res, "a-1")
	check.ErrorIs(t, err, ErrNoReceipt)
	check.Equal(t, "new", f.value("biz/"+res))
}

// The coordination backend restores an old snapshot: the issuer's counter
// goes back and it mints tokens it already issued, to new owners.
func TestMatrixOldCoordinationSnapshotRestored(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(4, 2, 1)), res, "A", "a", 1, "a"))
	b := f.grant(res, "B", tok(4, 2, 2))
	f.accepted(mut(b, res, "B", "b", 1, "b"))
	f.accepted(mut(f.grant(res, "C", tok(4, 2, 3)), res, "C", "c", 1, "c"))

	// Restored to counter 1: the issuer mints 2 and 3 again, for D and E.
	f.refused(mut(f.grant(res, "D", tok(4, 2, 2)), res, "D", "d", 1, "d"), ErrFenceRegression)
	f.refused(mut(f.grant(res, "E", tok(4, 2, 3)), res, "E", "e", 1, "e"), ErrFenceRegression)
	// The original holder of token 2 is merely stale: same grant, late.
	err := f.refused(mut(b, res, "B", "b2", 2, "b2"), ErrStaleOwner)
	check.NotErrorIs(t, err, ErrFenceRegression)
	// Nothing reset the highest value to restore traffic.
	check.Equal(t, tok(4, 2, 3), f.highest(res))
	check.Equal(t, "c", f.value("biz/"+res))
	// Once the restored issuer's counter passes the highest, its tokens are
	// above every accepted one again and are accepted (F1 holds).
	f.accepted(mut(f.grant(res, "F", tok(4, 2, 4)), res, "F", "f", 1, "f"))
}

// A write commits but its acknowledgement is lost; the recovering writer
// asks for the receipt by operation ID before doing anything else.
func TestMatrixLostTransactionAck(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	ctx := context.Background()
	a := f.grant(res, "A", tok(1, 1, 1))
	committed := f.accepted(mut(a, res, "A", "settle-7781", 1, "rows")) // ack lost
	got, err := f.g.Receipt(ctx, res, "settle-7781")
	must.NoError(t, err)
	check.Equal(t, committed, got)
	_, err = f.g.Receipt(ctx, res, "settle-7782")
	check.ErrorIs(t, err, ErrNoReceipt)

	// A resend by the same owner under the same fence returns the receipt.
	again, err := f.apply(mut(a, res, "A", "settle-7781", 1, "rows"))
	must.NoError(t, err)
	check.Equal(t, committed, again)
	// A new owner that resends the operation instead of asking is refused:
	// the operation already happened (F7).
	b := f.grant(res, "B", tok(1, 1, 2))
	f.refused(mut(b, res, "B", "settle-7781", 1, "rows"), ErrDuplicateOp)
	// An operation that never happened is submitted afresh under the new
	// fence; the old owner's copy, if still in flight, is then stale.
	f.accepted(mut(b, res, "B", "settle-7782", 1, "more rows"))
	f.refused(mut(a, res, "A", "settle-7782", 2, "more rows"), ErrStaleOwner)
}

// A forger raises the token to the maximum so that, if accepted, it would
// lock every honest owner out forever.
func TestMatrixForgedOversizedToken(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
	max := tok(math.MaxUint64, math.MaxUint64, math.MaxUint64)

	// Edit the token inside an honest grant.
	s := f.grant(res, "M", tok(1, 1, 1))
	i := bytes.Index(s, grantToken(tok(1, 1, 1)))
	must.True(t, i > 0)
	copy(s[i:], grantToken(max))
	f.refused(mut(s, res, "M", "m", 1, "m"), ErrBadGrant)
	// Sign one with a key the ring does not hold, under the ring's key ID.
	evil := NewKeyRing()
	must.NoError(t, evil.Add("k1", attackerKey))
	forged, err := evil.Sign(baseGrant(res, "M", max))
	must.NoError(t, err)
	f.refused(mut(forged, res, "M", "m", 1, "m"), ErrBadGrant)
	// An oversized envelope is refused before it is read.
	f.refused(mut(make([]byte, MaxSignedGrantSize+1), res, "M", "m", 1, "m"), ErrTooLarge)

	check.Equal(t, tok(1, 1, 1), f.highest(res))
	f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b"))
}

// grantToken is t as a signed grant carries it (its delegation, 24 bytes).
func grantToken(t Token) []byte { return appendDelegationToken(nil, t) }

func TestMatrixTamperedGrantDigest(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	s := f.grant(res, "A", tok(1, 1, 5))
	for name, tamper := range map[string]func([]byte){
		"MAC":        func(b []byte) { b[len(b)-1] ^= 1 },
		"owner":      func(b []byte) { copy(b[bytes.Index(b, []byte("\x00\x01A"))+2:], "M") },
		"issuer":     func(b []byte) { b[bytes.Index(b, grantToken(tok(1, 1, 5)))+legacyTokenSize+7] ^= 1 },
		"TTL":        func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-macSize-1-7-8:], uint64(time.Hour)) },
		"key ID":     func(b []byte) { b[len(signedMagic)+1] = '9' },
		"length":     func(b []byte) { b[len(signedMagic)+1+2] ^= 1 },
		"magic":      func(b []byte) { b[0] = 'X' },
		"scope byte": func(b []byte) { b[len(b)-macSize-1] = byte(ScopeNode) },
	} {
		t.Run(name, func(t *testing.T) {
			m := bytes.Clone(s)
			tamper(m)
			f.refused(mut(m, res, "A", "a", 1, "a"), ErrBadGrant)
		})
	}
	check.True(t, f.highest(res).IsZero())
}

// A valid proof for one resource presented on another (or by another owner,
// or for another operation) is a replay.
func TestMatrixCrossResourceReplay(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	s := f.grant("resource-1", "A", tok(1, 1, 9))
	f.accepted(mut(s, "resource-1", "A", "a", 1, "a"))
	f.refused(mut(s, "resource-2", "A", "a", 1, "a"), ErrBadGrant)
	f.refused(mut(s, "resource-1", "M", "m", 2, "m"), ErrBadGrant)
	m := mut(s, "resource-1", "A", "a2", 2, "a2")
	m.Operation = "delete"
	f.refused(m, ErrBadGrant)
	infos, _ := f.g.Resources(context.Background())
	check.Len(t, infos, 1)
}

func TestMatrixRevokedIssuerEpoch(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	old := f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.IssuerEpoch = 37 })
	f.accepted(mut(old, res, "A", "a1", 1, "a1"))
	must.NoError(t, f.ring.Revoke(37))
	f.refused(mut(old, res, "A", "a2", 2, "a2"), ErrRevoked)
	f.refused(mut(f.grant(res, "B", tok(1, 1, 2), func(g *Grant) { g.IssuerEpoch = 37 }), res, "B", "b", 1, "b"), ErrRevoked)
	f.accepted(mut(f.grant(res, "B", tok(1, 1, 2), func(g *Grant) { g.IssuerEpoch = 38 }), res, "B", "b", 1, "b"))
}

func TestMatrixForeignDomainGrant(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
	// Another cluster's lock service, sharing the trust bundle, grants the
	// same key with a token that happens to be larger.
	other := f.grant(res, "X", tok(9, 9, 9), func(g *Grant) { g.Domain = "cluster-b" })
	f.refused(mut(other, res, "X", "x", 1, "x"), ErrForeignDomain)
	check.Equal(t, tok(1, 1, 1), f.highest(res))
}

// The Guard caches verifications by signed bytes; retiring the key must
// still refuse bytes it verified a moment ago.
func TestRetiredKeyRefusedAfterCachedVerify(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	s := f.grant(res, "A", tok(1, 1, 1))
	f.accepted(mut(s, res, "A", "a1", 1, "a1"))
	must.NoError(t, f.ring.Add("k2", testSecret2))
	f.accepted(mut(s, res, "A", "a2", 2, "a2"))
	must.NoError(t, f.ring.Retire("k1"))
	f.refused(mut(s, res, "A", "a3", 3, "a3"), ErrBadGrant)
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.TTL = time.Minute }), res, "A", "a3", 3, "a3"))
}

// Sections of one delegation share its grant and order by Section: a
// paused earlier section of the same node is as stale as another node's,
// and the next delegation orders above every section of the last.
func TestMatrixStaleSection(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	a := f.grant(res, "A", tok(1, 1, 1))
	inSection := func(m Mutation, s uint64) Mutation { m.Section = s; return m }
	rc := f.accepted(inSection(mut(a, res, "A", "a2", 1, "two"), 2))
	check.Equal(t, sec(1, 1, 1, 2), rc.Token)
	f.refused(inSection(mut(a, res, "A", "a1", 1, "one"), 1), ErrStaleOwner)
	f.refused(mut(a, res, "A", "a0", 1, "whole"), ErrStaleOwner) // the delegation as a whole
	f.accepted(inSection(mut(a, res, "A", "a2b", 2, "two more"), 2))
	// A new section is a new fence: its segments start at 1.
	f.refused(inSection(mut(a, res, "A", "a3", 2, "three"), 3), ErrSegmentOrder)
	f.accepted(inSection(mut(a, res, "A", "a3", 1, "three"), 3))
	check.Equal(t, sec(1, 1, 1, 3), f.highest(res))
	b := f.grant(res, "B", tok(1, 1, 2))
	f.accepted(inSection(mut(b, res, "B", "b1", 1, "b"), 1))
	f.refused(inSection(mut(a, res, "A", "a9", 1, "late"), 9), ErrStaleOwner)
}
