package home

import (
	"fmt"
	"testing"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// TestWipedStoreServedNothing (H25): n1's disk is wiped and it starts again
// under its old ID with a new store. It learns e1, where n1 with its old
// store is home of the key, and e2, where its join replaced that entry.
// The new store served the key in no epoch: it grants it only once its
// gate in e2 has passed, and asks nobody for a Drained (the old store
// cannot answer). Without the wipe (the same store
// throughout, a plain restart's epochs learned anew) e1 is its own, and the
// key has been home since the bootstrap: it grants at once.
func TestWipedStoreServedNothing(t *testing.T) {
	oldN1, n2, n3 := mem("n1", 1), mem("n2", 2), mem("n3", 3)
	newN1 := mem("n1", 99)
	caps := msg.Caps{Ring: msg.RingV1}
	e1 := msg.Epoch{Number: 1, Members: []msg.Member{oldN1, n2, n3}, Caps: caps}
	key := keyHomedIn(e1, "n1")
	const (
		epochLease = 3 * time.Second
		skew       = 100 * time.Millisecond
	)
	for _, tc := range []struct {
		name      string
		self      msg.Member
		grantsNow bool
	}{
		{"wiped store", newN1, false},
		{"same store", oldN1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e2 := msg.Epoch{Number: 2, Members: []msg.Member{tc.self, n2, n3}, Caps: caps}
			now := time.Unix(1000, 0)
			m := New(Config{Self: tc.self, Inc: 1, EpochLease: epochLease, Skew: skew,
				MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
			m.OnEpoch(now, epoch.Learned{Epoch: e1})
			at := now.Add(10 * time.Millisecond)
			m.OnEpoch(at, epoch.Learned{Epoch: e2, Cert: msg.Certificate{Prev: e1}})
			m.SetLiveness(at, at.Add(time.Hour))
			m.Ready()
			m.Acquire(at, msg.Envelope{From: n3, FromInc: 1, Version: 1, Epoch: 2}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
			out := m.Ready().Msgs
			if granted := answered(out, n3.ID) == msg.KindGrant; granted != tc.grantsNow {
				t.Fatalf("granted %s at once: %v, want %v", key, granted, tc.grantsNow)
			}
			if tc.grantsNow {
				return
			}
			for _, env := range out {
				if _, ok := env.Body.(msg.DrainQuery); ok {
					t.Fatalf("the wiped store asked %s for a Drained of the old store's key", env.To)
				}
			}
			late := at.Add(epochLease + skew)
			m.Tick(late)
			m.Ready()
			m.Acquire(late, msg.Envelope{From: n3, FromInc: 1, Version: 1, Epoch: 2}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 2})
			if k := answered(m.Ready().Msgs, n3.ID); k != msg.KindGrant {
				t.Fatalf("the wiped store did not grant %s once its gate had passed (answered %v)", key, k)
			}
		})
	}
}

// TestHolderRestartedByStore: a Reclaim tells a home that the sender's
// earlier incarnations are gone, and frees what they held; but only those of
// the sender's own store. A wiped node's new store counts its incarnations
// from 1 again, so a late Reclaim from its old store (incarnation 2, say)
// says nothing of the new store's incarnation 1, which may hold a
// delegation now: freeing it granted the key to a second holder while the
// first ran (seed 7,777 of the first simulator runs with wipes, D4).
func TestHolderRestartedByStore(t *testing.T) {
	oldN1, newN1, n2, n3 := mem("n1", 1), mem("n1", 99), mem("n2", 2), mem("n3", 3)
	caps := msg.Caps{Ring: msg.RingV1}
	e1 := msg.Epoch{Number: 1, Members: []msg.Member{newN1, n2, n3}, Caps: caps}
	key := keyHomedIn(e1, "n3")
	for _, tc := range []struct {
		name  string
		from  msg.Member
		inc   uint64
		freed bool
	}{
		{"the old store of the holder's node, a higher incarnation", oldN1, 2, false},
		{"the holder's store, a later incarnation", newN1, 2, true},
		{"the holder's store, its own incarnation", newN1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			m := New(Config{Self: n3, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
				MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
			m.OnEpoch(now, epoch.Learned{Epoch: e1})
			at := now.Add(10 * time.Millisecond)
			m.OnEpoch(at, epoch.Learned{Epoch: msg.Epoch{Number: 2, Members: e1.Members, Caps: caps}, Cert: msg.Certificate{Prev: e1}})
			m.SetLiveness(at, at.Add(time.Hour))
			m.Ready()
			m.Acquire(at, msg.Envelope{From: newN1, FromInc: 1, Version: 1, Epoch: 2}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
			if k := answered(m.Ready().Msgs, newN1.ID); k != msg.KindGrant {
				t.Fatalf("n1 asked for %s first: answered %v, want a grant", key, k)
			}
			m.HolderRestarted(at, tc.from, tc.inc)
			m.Ready()
			m.Acquire(at, msg.Envelope{From: n2, FromInc: 1, Version: 1, Epoch: 2}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
			out := m.Ready().Msgs
			if granted := answered(out, n2.ID) == msg.KindGrant; granted != tc.freed {
				t.Fatalf("Reclaim from store %d at incarnation %d, then n2 asks: granted %v, want %v (%v)", tc.from.Store, tc.inc, granted, tc.freed, out)
			}
		})
	}
}

// keyHomedIn returns a key homed at id in e.
func keyHomedIn(e msg.Epoch, id msg.NodeID) string {
	r := epoch.NewRing(e)
	for i := 0; ; i++ {
		if h, _ := r.Home(fmt.Sprintf("k%d", i)); h.ID == id {
			return fmt.Sprintf("k%d", i)
		}
	}
}
