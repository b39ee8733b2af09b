package delegation

import (
	"testing"
	"time"
	"unsafe"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/zerotest"
	"github.com/homelock/homelock/msg"
)

// TestKeyStateSize holds the line on the holder's share of an idle
// delegation. A node may hold a million; the target for one on the holder,
// with its key, table slot and timer, is 128 bytes (the harness's "heap per
// idle delegation, holder"). The holder's state is 80 bytes, a
// malloc size class: a field more moves it to the next (96). Put what only
// a key in motion needs in keyExtra, and what many delegations share in
// their origin, instead.
func TestKeyStateSize(t *testing.T) {
	if got := unsafe.Sizeof(keyState{}); got > 80 {
		t.Errorf("keyState is %d bytes, over its 80", got)
	}
}

// TestExtraEmpty: empty must see every field of keyMotion and lastRelease,
// or the state in a field it misses would be dropped with the rest (trim).
func TestExtraEmpty(t *testing.T) {
	if !new(keyMotion).empty() || !new(lastRelease).empty() {
		t.Fatal("the zero parts are not empty")
	}
	zerotest.EachField(t, func(field string, x *keyMotion) {
		if x.empty() {
			t.Errorf("keyMotion.empty misses field %s", field)
		}
	})
	zerotest.EachField(t, func(field string, l *lastRelease) {
		if l.empty() {
			t.Errorf("lastRelease.empty misses field %s", field)
		}
	})
}

// TestIdleKeepsLittle: an idle delegation keeps no extra state; one that
// follows an earlier delegation of the same key keeps only the last
// release (to answer a repeated Recall), not the request that got it.
func TestIdleKeepsLittle(t *testing.T) {
	m, now := heldMachine(t, "k")
	ks := m.get("k")
	if ks.x != nil || ks.active != 0 {
		t.Fatalf("an idle first delegation keeps extra state %+v (active %d)", ks.x, ks.active)
	}
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	env := msg.Envelope{From: self, FromInc: 1}
	first := fence.Token{Epoch: 1, Incarnation: 1, Counter: 1}
	m.Recall(now, env, msg.Recall{Key: "k", Token: first})
	m.Settled(now, "k", first, []byte("b1"), nil)
	m.Ready()
	m.Lock(now, "k", 2, now.Add(time.Second), 0)
	a := m.Ready().Msgs[0].Body.(msg.Acquire)
	m.Grant(now, env, msg.Grant{Key: "k", Req: a.Req, Attempt: a.Attempt, Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: 2}, Lease: time.Hour, Barrier: []byte("b1")})
	m.Fresh(now, "k", fence.Token{Epoch: 1, Incarnation: 1, Counter: 2}, nil)
	if ev := m.Ready().Events; len(ev) != 2 || ev[1].Kind != Admitted {
		t.Fatalf("second grant produced %+v, want WaitFresh then an admission", ev)
	}
	m.Unlock(now, "k", 2)
	if ks.x == nil || ks.x.motion != nil || ks.x.last.token != first || string(ks.x.last.barrier) != "b1" {
		t.Fatalf("idle after a handoff: extra %+v, want the last release only", ks.x)
	}
}

// TestDuplicateGrantOfLostDelegation: a duplicate Grant of a delegation the
// holder lost without a Release (here to a clock jump) draws no Release,
// and one of a delegation it released draws that Release again: giving it
// back with the Grant's own barrier would hand on one older than the writes
// made under it, and the home must wait a lost delegation out.
func TestDuplicateGrantOfLostDelegation(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	env := msg.Envelope{From: self, FromInc: 1}
	tok := fence.Token{Epoch: 1, Incarnation: 1, Counter: 1}
	grant := func() msg.Grant {
		return msg.Grant{Key: "k", Token: tok, Lease: time.Hour, Barrier: []byte("b0")}
	}
	t.Run("lost", func(t *testing.T) {
		m, now := heldMachine(t, "k")
		m.ClockJump(now)
		m.Ready()
		m.Grant(now, env, grant())
		if out := m.Ready(); len(out.Msgs) != 0 {
			t.Fatalf("duplicate Grant of a lost delegation sent %+v, want nothing", out.Msgs)
		}
	})
	t.Run("released", func(t *testing.T) {
		m, now := heldMachine(t, "k")
		m.Recall(now, env, msg.Recall{Key: "k", Token: tok})
		m.Settled(now, "k", tok, []byte("b1"), nil)
		m.Ready()
		m.Grant(now, env, grant())
		out := m.Ready()
		if len(out.Msgs) != 1 {
			t.Fatalf("duplicate Grant of a released delegation sent %+v, want its Release again", out.Msgs)
		}
		if r, ok := out.Msgs[0].Body.(msg.Release); !ok || r.Token != tok || string(r.Barrier) != "b1" {
			t.Fatalf("duplicate Grant answered with %+v, want the Release with barrier b1", out.Msgs[0].Body)
		}
	})
}
