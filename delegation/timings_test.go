package delegation

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// TestOnTimingsFailsClosed: a timings mismatch fails the lockers already
// queued at once and every Lock while it lasts, as unavailable with its
// reason; a mismatch of protocol versions takes precedence in the reason;
// once both end, a Lock waits on the home again and is not failed.
func TestOnTimingsFailsClosed(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	other := msg.Member{ID: "n2", Store: 2, Addr: "n2", Version: 1}
	newer := other
	newer.Version = 2
	const why = "cluster locks unavailable: this node runs EpochLease 6s but n2 runs EpochLease 9s"
	m := New(Config{Self: self, Inc: 1, MaxDrift: 0.01, MinUseful: time.Millisecond, RetryInterval: 50 * time.Millisecond, Lease: time.Second})
	now := time.Unix(1000, 0)
	m.OnEpoch(now, msg.Epoch{Number: 1, Members: []msg.Member{self, other}})
	// drain takes the machine's output: the Acquires sent, the lockers
	// failed and why.
	drain := func() (acquires int, lockers []uint64, details []string) {
		out := m.Ready()
		for _, ev := range out.Events {
			if ev.Kind != Failed || ev.Reason != ReasonUnavailable {
				t.Fatalf("event %+v, want only failures as unavailable", ev)
			}
			lockers, details = append(lockers, ev.Locker), append(details, ev.Detail)
		}
		for _, o := range out.Msgs {
			if _, ok := o.Body.(msg.Acquire); ok {
				acquires++
			}
		}
		return acquires, lockers, details
	}

	m.Lock(now, "k", 1, now.Add(time.Second), 0, 0)
	if n, l, _ := drain(); n != 1 || len(l) != 0 {
		t.Fatalf("Lock sent %d Acquires and failed %v, want 1 Acquire", n, l)
	}
	m.OnTimings(now, why)
	if _, l, d := drain(); len(l) != 1 || l[0] != 1 || d[0] != why || m.Mixed() != why {
		t.Fatalf("queued locker at the mismatch: failed %v %q, mixed %q; want locker 1 with %q", l, d, m.Mixed(), why)
	}
	m.Lock(now, "k", 2, now.Add(time.Second), 0, 0)
	if n, l, d := drain(); n != 0 || len(l) != 1 || l[0] != 2 || d[0] != why {
		t.Fatalf("Lock during the mismatch: failed %v %q, want locker 2 with %q", l, d, why)
	}

	m.OnEpoch(now, msg.Epoch{Number: 2, Members: []msg.Member{self, newer}})
	if m.Mixed() == why || m.Mixed() == "" {
		t.Fatalf("mixed versions and timings: reason %q, want the versions'", m.Mixed())
	}
	m.OnEpoch(now, msg.Epoch{Number: 3, Members: []msg.Member{self, other}})
	if m.Mixed() != why {
		t.Fatalf("versions agree again, timings do not: reason %q, want %q", m.Mixed(), why)
	}
	m.OnTimings(now, "")
	_, _, _ = drain()
	if m.Mixed() != "" {
		t.Fatalf("everything agrees: still mixed: %q", m.Mixed())
	}
	m.Lock(now, "k", 3, now.Add(time.Second), 0, 0)
	if _, l, _ := drain(); len(l) != 0 {
		t.Fatalf("Lock after the mismatch failed lockers %v", l)
	}
	// The first request is still out (its Acquire was sent before the
	// mismatch); the new locker waits on it, and it is asked again.
	later := now.Add(100 * time.Millisecond)
	m.Tick(later)
	if n, l, _ := drain(); n != 1 || len(l) != 0 {
		t.Fatalf("after the mismatch: %d Acquires in a RetryInterval and lockers %v failed, want 1 and none", n, l)
	}
}
