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
// idle delegation, holder"). The holder's state is 64 bytes, a
// malloc size class: a field more moves it to the next (80), and the
// holder's share over 128. Put what only some delegations need in keyExt,
// what only a key in motion needs in keyExtra, and what many delegations
// share in their origin, instead.
func TestKeyStateSize(t *testing.T) {
	if got := unsafe.Sizeof(keyState{}); got > 64 {
		t.Errorf("keyState is %d bytes, over its 64", got)
	}
}

// TestExtraEmpty: empty must see every field of keyMotion and lastRelease,
// or the state in a field it misses would be dropped with the rest (trim).
func TestExtraEmpty(t *testing.T) {
	if !new(keyMotion).empty() || !new(lastRelease).empty() || !new(keyExt).empty() {
		t.Fatal("the zero parts are not empty")
	}
	zerotest.EachField(t, func(field string, e *keyExt) {
		if e.empty() {
			t.Errorf("keyExt.empty misses field %s", field)
		}
	})
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
	if ks.ext != nil || ks.active != 0 {
		t.Fatalf("an idle first delegation keeps extra state %+v (active %d)", ks.ext, ks.active)
	}
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	env := msg.Envelope{From: self, FromInc: 1}
	first := fence.Token{Epoch: 1, Incarnation: 1, Counter: 1}
	m.Recall(now, env, msg.Recall{Key: "k", Token: first})
	m.Settled(now, "k", first, []byte("b1"), nil)
	m.Ready()
	m.Lock(now, "k", 2, now.Add(time.Second), 0, 0)
	a := m.Ready().Msgs[0].Body.(msg.Acquire)
	m.Grant(now, env, msg.Grant{Key: "k", Req: a.Req, Attempt: a.Attempt, Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: 2}, Lease: time.Hour, Barrier: []byte("b1")})
	m.Fresh(now, "k", fence.Token{Epoch: 1, Incarnation: 1, Counter: 2}, nil)
	if ev := m.Ready().Events; len(ev) != 2 || ev[1].Kind != Admitted {
		t.Fatalf("second grant produced %+v, want WaitFresh then an admission", ev)
	}
	m.Unlock(now, "k", 2)
	x := ks.extra()
	if x == nil || x.motion != nil || x.last.token != first || string(x.last.barrier) != "b1" {
		t.Fatalf("idle after a handoff: extra %+v, want the last release only", x)
	}
	if string(ks.inherited()) != "b1" || ks.is(oddLease) {
		t.Fatalf("idle after a handoff: inherited %q, odd lease %v; want b1 and the usual lease", ks.inherited(), ks.is(oddLease))
	}
}

// TestOddLease: a delegation whose lease is not the one this node asks for
// keeps it in ext, and reads it back until a renewal brings the usual one,
// when ext goes; the usual lease costs no ext at all.
func TestOddLease(t *testing.T) {
	m, _ := heldMachine(t, "k") // granted Config.Lease
	ks := m.get("k")
	if ks.ext != nil || m.Lease("k") != time.Hour {
		t.Fatalf("usual lease: ext %+v, Lease %v; want none and 1h", ks.ext, m.Lease("k"))
	}
	m.setLease(ks, 3*time.Second)
	if ks.ext == nil || !ks.is(oddLease) || m.Lease("k") != 3*time.Second {
		t.Fatalf("odd lease: ext %+v, Lease %v; want it kept and 3s", ks.ext, m.Lease("k"))
	}
	m.setLease(ks, time.Hour)
	if ks.ext != nil || ks.is(oddLease) || m.Lease("k") != time.Hour {
		t.Fatalf("back to the usual lease: ext %+v, Lease %v; want none and 1h", ks.ext, m.Lease("k"))
	}
	// An odd lease of zero is still odd: it must not read as the usual one.
	m.setLease(ks, 0)
	ks.trim()
	if m.Lease("k") != 0 {
		t.Fatalf("a zero lease reads as %v", m.Lease("k"))
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
