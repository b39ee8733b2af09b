package home

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/zerotest"
	"github.com/homelock/homelock/msg"
)

// TestEntrySize holds the line on the home's share of an idle delegation. A
// home may keep a million; the target for one on the home, with its key,
// table slot and timer, is 128 bytes (the harness's "heap per idle
// delegation, home"). An entry with its live delegation is 64 bytes, a malloc
// size class: a field more moves it to the next (80), and the home's share
// over 128. Put what only some delegations need in entryExt, what only a
// contended or moving key needs in entryExtra, and what many delegations
// share in their mint, instead.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 64 {
		t.Errorf("entry is %d bytes, over its 64", got)
	}
}

// TestEntryExtraEmpty: empty must see every field of entryExtra, or the
// state in a field it misses would be dropped with the rest (trim).
func TestEntryExtraEmpty(t *testing.T) {
	if !new(entryExtra).empty() || !new(entryExt).empty() {
		t.Fatal("the zero entryExtra or entryExt is not empty")
	}
	zerotest.EachField(t, func(field string, e *entryExt) {
		if e.empty() {
			t.Errorf("entryExt.empty misses field %s", field)
		}
	})
	zerotest.EachField(t, func(field string, x *entryExtra) {
		if x.empty() {
			t.Errorf("entryExtra.empty misses field %s", field)
		}
	})
}

// TestRequestKeptWhole: an entry keeps only the sequence number of the
// request its delegation answered, the incarnation being the requester's;
// a request numbered otherwise is kept whole. Either way a retransmission
// gets the same grant back and a Withdraw of that request frees it.
func TestRequestKeptWhole(t *testing.T) {
	for _, req := range []msg.RequestID{{Inc: 3, Seq: 7}, {Inc: 2, Seq: 7}, {Inc: 3, Seq: 0}, {Inc: 0, Seq: 5}} {
		m, env, now := epoch4Home()
		key := homedKeys(t, m, 1)[0]
		var grants []msg.Grant
		for range 2 {
			m.Acquire(now, env, msg.Acquire{Key: key, Req: req, Attempt: 1})
			for _, o := range m.Ready().Msgs {
				if g, ok := o.Body.(msg.Grant); ok {
					grants = append(grants, g)
				}
			}
		}
		if len(grants) != 2 || !reflect.DeepEqual(grants[0], grants[1]) || grants[0].Req != req {
			t.Fatalf("request %+v: grants %+v, want the same one twice", req, grants)
		}
		m.Withdraw(now, env, msg.Withdraw{Key: key, Req: req})
		if _, _, ok := m.Holding(key); ok {
			t.Fatalf("request %+v: withdrawn, yet still held", req)
		}
		if m.keys.Len() != 0 {
			t.Fatalf("request %+v: the freed entry was kept", req)
		}
	}
}

// epoch4Home is n1's home machine in epoch 4 of n1 and n2, with an hour of
// liveness and MaxLease 1s, and the envelope of n2's third incarnation.
func epoch4Home() (*Machine, msg.Envelope, time.Time) {
	self := msg.Member{ID: "n1", Store: 1, Version: 1}
	n2 := msg.Member{ID: "n2", Store: 2, Version: 1}
	e := msg.Epoch{Number: 4, Members: []msg.Member{self, n2}, Caps: msg.Caps{Ring: msg.RingV1}}
	now := time.Unix(1000, 0)
	m := New(Config{Self: self, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
		MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
	m.OnEpoch(now, epoch.Learned{Epoch: e})
	m.SetLiveness(now, now.Add(time.Hour))
	return m, msg.Envelope{From: n2, FromInc: 3, Version: 1, Epoch: 4}, now
}

// TestLeaseKept: a delegation granted MaxLease keeps no ext; one granted
// less (asked for less, or short of liveness) keeps its lease there, and a
// retransmitted Grant carries it again; a renewal to MaxLease drops it.
func TestLeaseKept(t *testing.T) {
	m, env, now := epoch4Home()
	keys := homedKeys(t, m, 2)
	grant := func(key string, seq uint64, lease time.Duration) msg.Grant {
		t.Helper()
		var gs []msg.Grant
		for range 2 { // the second is a retransmission
			m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 3, Seq: seq}, Attempt: 1, Lease: lease})
			for _, o := range m.Ready().Msgs {
				if g, ok := o.Body.(msg.Grant); ok {
					gs = append(gs, g)
				}
			}
		}
		if len(gs) != 2 || gs[0].Lease != gs[1].Lease {
			t.Fatalf("key %s: grants %+v, want the same lease twice", key, gs)
		}
		return gs[0]
	}
	if g := grant(keys[0], 1, time.Second); g.Lease != time.Second || m.keys.Get(keys[0]).ext != nil {
		t.Fatalf("MaxLease asked: lease %v, ext %+v; want 1s and none", g.Lease, m.keys.Get(keys[0]).ext)
	}
	g := grant(keys[1], 2, 300*time.Millisecond)
	ke := m.keys.Get(keys[1])
	if g.Lease != 300*time.Millisecond || ke.ext == nil || !ke.is(oddLease) {
		t.Fatalf("less asked: lease %v, ext %+v; want 300ms kept", g.Lease, ke.ext)
	}
	m.Renew(now, env, msg.Renew{Key: keys[1], Token: g.Token, Attempt: 1, Lease: time.Second})
	m.Ready()
	if ke.ext != nil || ke.is(oddLease) || m.lease(ke) != time.Second {
		t.Fatalf("renewed to MaxLease: ext %+v, lease %v; want none and 1s", ke.ext, m.lease(ke))
	}
}

// TestSignedNotKept: a grant signed with Config.Sign is sent and not kept
// (an idle signed delegation's entry has no ext), and a retransmitted Grant
// is signed again from what the entry keeps: the same key, holder, request,
// token and epoch, with the lease as last granted or renewed.
func TestSignedNotKept(t *testing.T) {
	m, env, now := epoch4Home()
	var infos []GrantInfo
	m.cfg.Sign = func(g GrantInfo) []byte {
		infos = append(infos, g)
		return []byte(fmt.Sprintf("signed %s %s %v %s %d %v", g.Key, g.Holder.ID, g.Req, g.Token, g.Epoch, g.Lease))
	}
	keys := homedKeys(t, m, 3)
	grants := func() []msg.Grant {
		var gs []msg.Grant
		for _, o := range m.Ready().Msgs {
			if g, ok := o.Body.(msg.Grant); ok {
				gs = append(gs, g)
			}
		}
		return gs
	}
	acquire := func(key string, seq uint64, lease time.Duration) []msg.Grant {
		m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 3, Seq: seq}, Attempt: 1, Lease: lease})
		return grants()
	}

	first := acquire(keys[0], 1, time.Second)
	if len(first) != 1 || string(first[0].Signed) != "signed "+keys[0]+" n2 {3 1} e4.i1.c1 4 1s" {
		t.Fatalf("grants %+v, want one signed", first)
	}
	if ke := m.keys.Get(keys[0]); ke.ext != nil || !ke.is(signedGrant) {
		t.Fatalf("signed idle delegation: ext %+v, signed flag %v; want no ext and the flag", ke.ext, ke.is(signedGrant))
	}
	again := acquire(keys[0], 1, time.Second)
	if len(again) != 1 || string(again[0].Signed) != string(first[0].Signed) || again[0].Token != first[0].Token {
		t.Fatalf("retransmission %+v, want %+v again", again, first)
	}
	if len(infos) != 2 || infos[0] != infos[1] {
		t.Fatalf("signed %+v, want the same grant twice", infos)
	}

	// A lease granted short, then renewed: the re-sent Grant carries and
	// signs the lease as renewed.
	short := acquire(keys[1], 2, 300*time.Millisecond)
	if len(short) != 1 || short[0].Lease != 300*time.Millisecond {
		t.Fatalf("grants %+v, want one of 300ms", short)
	}
	m.Renew(now, env, msg.Renew{Key: keys[1], Token: short[0].Token, Attempt: 1, Lease: 500 * time.Millisecond})
	m.Ready()
	re := acquire(keys[1], 2, 300*time.Millisecond)
	want := "signed " + keys[1] + " n2 {3 2} e4.i1.c2 4 500ms"
	if len(re) != 1 || re[0].Lease != 500*time.Millisecond || string(re[0].Signed) != want {
		t.Fatalf("re-sent after a renewal: %+v, want lease 500ms signed %q", re, want)
	}

	// A signer that fails leaves the delegation unsigned: its first Grant
	// and a re-sent one carry nothing, and nothing is signed again.
	m.cfg.Sign = func(GrantInfo) []byte { infos = append(infos, GrantInfo{}); return nil }
	failed := acquire(keys[2], 4, time.Second)
	infos = infos[:0]
	if again := acquire(keys[2], 4, time.Second); len(failed) != 1 || failed[0].Signed != nil || len(again) != 1 || again[0].Signed != nil ||
		m.keys.Get(keys[2]).is(signedGrant) || len(infos) != 0 {
		t.Fatalf("failed signer: grants %+v then %+v, signed again %d times; want none signed and no second try", failed, again, len(infos))
	}

	// Without Sign nothing is signed, first or again.
	m.cfg.Sign = nil
	m.Release(now, msg.Release{Key: keys[0], Token: first[0].Token})
	m.Ready()
	if g := acquire(keys[0], 3, time.Second); len(g) != 1 || g[0].Signed != nil || m.keys.Get(keys[0]).is(signedGrant) {
		t.Fatalf("unsigned grant %+v, want no signed bytes and no flag", g)
	}
}

// TestTokenKeptWhole: an entry keeps the low 32 bits of its token's counter
// and shares the rest in a mint; a counter past 32 bits, and a grant on
// either side of the boundary, still read back whole and distinct.
func TestTokenKeptWhole(t *testing.T) {
	m, env, now := epoch4Home()
	keys := homedKeys(t, m, 3)
	m.counter = 1<<32 - 2
	for i, key := range keys {
		m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 3, Seq: uint64(i + 1)}, Attempt: 1})
		m.Ready()
	}
	for i, key := range keys {
		tok, _, ok := m.Holding(key)
		want := fence.Token{Epoch: 4, Incarnation: 1, Counter: 1<<32 - 1 + uint64(i)}
		if !ok || tok != want {
			t.Fatalf("key %d holds %v (%v), want %v", i, tok, ok, want)
		}
	}
	if m.mints.Len() != 2 {
		t.Fatalf("%d mints for counters on both sides of 2^32, want 2", m.mints.Len())
	}
}

// TestGrantInfoFence: the lockGrant.v1 a home signs binds the key, the
// holder's node ID, the request as inc.seq, the delegation's token (also
// as the lease's name), the epoch, the domain, the lease as its TTL, the
// operation and the cluster scope.
func TestGrantInfoFence(t *testing.T) {
	tok := fence.Token{Epoch: 4, Incarnation: 2, Counter: 9}
	g := GrantInfo{Key: "k", Holder: msg.Member{ID: "n2", Store: 7}, Req: msg.RequestID{Inc: 3, Seq: 11}, Token: tok, Epoch: 4, Lease: 250 * time.Millisecond}
	want := fence.Grant{Resource: "k", Owner: "n2", RequestID: "3.11", Lease: tok.String(), Token: tok, IssuerEpoch: 4,
		Domain: "orders", TTL: 250 * time.Millisecond, Operation: "write", Scope: fence.ScopeCluster}
	if got := g.Fence("orders", "write"); got != want {
		t.Fatalf("Fence = %+v, want %+v", got, want)
	}
}

// TestLeaseWithinLiveness (D3): a grant's and a renewal's lease is clamped
// so that the home's own record of the delegation, lease + Skew, ends
// within its epoch liveness; a home with less than MinUseful left after
// Skew, or with no liveness at all, grants nothing.
func TestLeaseWithinLiveness(t *testing.T) {
	const skew = 100 * time.Millisecond // epoch4Home's
	for _, tc := range []struct {
		name  string
		left  time.Duration // liveness left at the request; negative for none
		lease time.Duration // granted; zero when nothing is
	}{
		{"plenty", time.Hour, time.Second},
		{"MaxLease and Skew fit exactly", time.Second + skew, time.Second},
		{"short: the lease ends Skew before the liveness", 600 * time.Millisecond, 500 * time.Millisecond},
		{"Skew and MinUseful do not fit", skew, 0},
		{"no liveness", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, env, now := epoch4Home()
			key := homedKeys(t, m, 1)[0]
			if tc.left < 0 {
				m.SetLiveness(now, time.Time{})
			} else {
				m.SetLiveness(now, now.Add(tc.left))
			}
			m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 3, Seq: 1}, Attempt: 1, Lease: time.Second})
			var got time.Duration
			for _, o := range m.Ready().Msgs {
				if g, ok := o.Body.(msg.Grant); ok {
					got = g.Lease
				}
			}
			if got != tc.lease {
				t.Fatalf("granted a lease of %v, want %v", got, tc.lease)
			}
			if got == 0 {
				return
			}
			tok, _, _ := m.Holding(key)
			at := now.Add(tc.lease / 2)
			m.Renew(at, env, msg.Renew{Key: key, Token: tok, Attempt: 2, Lease: time.Second})
			for _, o := range m.Ready().Msgs {
				if r, ok := o.Body.(msg.RenewReply); ok && r.OK && at.Add(r.Lease+skew).After(now.Add(tc.left)) {
					t.Fatalf("renewed to %v at %v: the home's record ends past its liveness", r.Lease, at.Sub(now))
				}
			}
		})
	}
}
