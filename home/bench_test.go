package home

import (
	"fmt"
	"testing"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

func benchHome(tb testing.TB) (*Machine, msg.Member, time.Time) {
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	peer := msg.Member{ID: "n2", Store: 2, Addr: "n2", Version: 1}
	e := msg.Epoch{Number: 1, Members: []msg.Member{self, peer}, Caps: msg.Caps{Ring: msg.RingV1}}
	now := time.Unix(1000, 0)
	m := New(Config{Self: self, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
		MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
	m.OnEpoch(now, epoch.Learned{Epoch: e})
	m.SetLiveness(now, now.Add(time.Hour))
	m.Ready()
	return m, peer, now
}

// homedKeys returns n keys whose home is self (n1) in benchHome's epoch.
func homedKeys(tb testing.TB, m *Machine, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		if m.IsHome(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// BenchmarkAcquireGrantRelease: a home handling an Acquire for a free key
// (grant) and its Release.
func BenchmarkAcquireGrantRelease(b *testing.B) {
	m, peer, now := benchHome(b)
	keys := homedKeys(b, m, 1024)
	env := msg.Envelope{From: peer, FromInc: 1, Version: 1}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := keys[i%len(keys)]
		m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: uint64(i + 1)}, Attempt: 1})
		out := m.Ready()
		g, ok := out.Msgs[0].Body.(msg.Grant)
		if !ok {
			b.Fatalf("Acquire answered %v", out.Msgs[0].Body.Kind())
		}
		m.Release(now, msg.Release{Key: key, Token: g.Token})
		m.Ready()
	}
}

// TestGrantThenQueueThenHandoff: the basic conversation through the home, as
// a check that the benchmark measures the path it claims.
func TestGrantThenQueueThenHandoff(t *testing.T) {
	m, peer, now := benchHome(t)
	third := msg.Member{ID: "n3", Store: 3, Version: 1}
	key := homedKeys(t, m, 1)[0]
	m.Acquire(now, msg.Envelope{From: peer, FromInc: 1, Version: 1}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
	g := m.Ready().Msgs[0].Body.(msg.Grant)
	// n3 is not a member of the epoch: refused, not queued.
	m.Acquire(now, msg.Envelope{From: third, FromInc: 1, Version: 1}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
	if r, ok := m.Ready().Msgs[0].Body.(msg.Refused); !ok || r.Reason != msg.RefusedNotMember {
		t.Fatal("a non-member was not refused")
	}
	// The home itself queues behind n2: n2 is recalled once.
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	m.Acquire(now, msg.Envelope{From: self, FromInc: 1, Version: 1}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 9}, Attempt: 1})
	out := m.Ready()
	var recalls, waits int
	for _, e := range out.Msgs {
		switch e.Body.(type) {
		case msg.Recall:
			recalls++
		case msg.Wait:
			waits++
		}
	}
	if recalls != 1 || waits != 1 {
		t.Fatalf("queueing behind a holder sent %d recalls and %d waits, want 1 and 1", recalls, waits)
	}
	m.Release(now, msg.Release{Key: key, Token: g.Token, Barrier: []byte("b1")})
	next := m.Ready().Msgs[0].Body.(msg.Grant)
	if !g.Token.Less(next.Token) || string(next.Barrier) != "b1" {
		t.Fatalf("handoff granted %s with barrier %q after %s", next.Token, next.Barrier, g.Token)
	}
}

// A step's messages cost the home no array of their own: answering a
// resent Acquire allocates only the Grant it sends. And what an earlier
// Ready returned does not stay reachable through the kept array.
func TestReadyKeepsItsArray(t *testing.T) {
	m, peer, now := benchHome(t)
	keys := homedKeys(t, m, 3)
	env := msg.Envelope{From: peer, FromInc: 1, Version: 1}
	for i, key := range keys {
		m.Acquire(now, env, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: uint64(i + 1)}, Attempt: 1})
	}
	if n := len(m.Ready().Msgs); n != 3 {
		t.Fatalf("three Acquires answered with %d messages", n)
	}
	resend := msg.Acquire{Key: keys[0], Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 2}
	m.Acquire(now, env, resend)
	if out := m.Ready().Msgs; len(out) != 1 || out[0].Body.(msg.Grant).Key != keys[0] {
		t.Fatalf("a resent Acquire answered with %v", out)
	}
	for _, stale := range m.out.Msgs[1:3] {
		if stale.Body != nil {
			t.Fatalf("the kept array still holds %v", stale.Body)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		m.Acquire(now, env, resend)
		m.Ready()
	})
	if allocs != 1 {
		t.Fatalf("answering a resent Acquire allocated %v times, want 1 (its Grant)", allocs)
	}
}
