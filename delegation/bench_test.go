package delegation

import (
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// heldMachine returns a holder that holds key's delegation until far away.
func heldMachine(tb testing.TB, key string) (*Machine, time.Time) {
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	m := New(Config{Self: self, Inc: 1, MaxDrift: 0.01, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond, Lease: time.Hour})
	now := time.Unix(1000, 0)
	m.OnEpoch(now, msg.Epoch{Number: 1, Members: []msg.Member{self}})
	a := lockAsks(tb, m, now, key, 0)
	m.Grant(now, msg.Envelope{From: self, FromInc: 1}, msg.Grant{Key: key, Req: a.Req, Attempt: a.Attempt, Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: 1}, Lease: time.Hour})
	if ev := m.Ready().Events; len(ev) != 1 || ev[0].Kind != Admitted {
		tb.Fatalf("grant produced %+v, want one admission", ev)
	}
	if !m.Unlock(now, key, 1) {
		tb.Fatal("first unlock was not the fast path")
	}
	return m, now
}

// BenchmarkTryAdmitUnlock is the repeat-lock fast path: a key whose
// delegation this node holds, locked and unlocked with zero messages.
func BenchmarkTryAdmitUnlock(b *testing.B) {
	m, now := heldMachine(b, "k")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		locker := uint64(i + 2)
		if _, ok := m.TryAdmit(now, "k", locker, 0); !ok {
			b.Fatal("fast path refused")
		}
		if !m.Unlock(now, "k", locker) {
			b.Fatal("unlock left work")
		}
	}
	if out := m.Ready(); len(out.Msgs) != 0 {
		b.Fatalf("fast path sent %d messages", len(out.Msgs))
	}
}

// TestFastPathSendsNothing: repeat locks of a held key send no message and
// allocate nothing.
func TestFastPathSendsNothing(t *testing.T) {
	m, now := heldMachine(t, "k")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := m.TryAdmit(now, "k", 7, 0); !ok {
			t.Fatal("fast path refused")
		}
		m.Unlock(now, "k", 7)
	})
	if allocs != 0 {
		t.Errorf("fast path allocates %.1f times per lock", allocs)
	}
	if out := m.Ready(); len(out.Msgs) != 0 || len(out.Events) != 0 {
		t.Errorf("fast path produced %d messages and %d events", len(out.Msgs), len(out.Events))
	}
}

// TestReadyKeepsItsArrays: the repeat of a step that sends and reports costs
// the holder no array of its own, and what an earlier Ready returned does
// not stay reachable through the kept arrays.
func TestReadyKeepsItsArrays(t *testing.T) {
	m, now := heldMachine(t, "k")
	for _, key := range []string{"a", "b", "c"} {
		m.Lock(now, key, 9, now.Add(time.Second), 0, 0)
	}
	if out := m.Ready(); len(out.Msgs) != 3 {
		t.Fatalf("three Locks sent %d messages", len(out.Msgs))
	}
	m.Cancel(now, "a", 9)
	if out := m.Ready(); len(out.Msgs) != 1 {
		t.Fatalf("a cancel sent %v, want its Withdraw", out.Msgs)
	}
	for _, stale := range m.out.Msgs[1:3] {
		if stale.Body != nil {
			t.Fatalf("the kept array still holds %v", stale.Body)
		}
	}
	tok, _, _, _ := m.Holding("k")
	env := msg.Envelope{From: msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}, FromInc: 1}
	allocs := testing.AllocsPerRun(100, func() {
		// A Recall of a token no longer held is answered with a Release.
		m.Recall(now, env, msg.Recall{Key: "k", Token: fence.Token{Epoch: tok.Epoch, Incarnation: tok.Incarnation, Counter: tok.Counter + 9}})
		if out := m.Ready(); len(out.Msgs) != 1 {
			t.Fatalf("a stale Recall was answered with %v", out.Msgs)
		}
	})
	if allocs > 1 {
		t.Fatalf("answering a stale Recall allocated %v times, want at most its Release", allocs)
	}
}
