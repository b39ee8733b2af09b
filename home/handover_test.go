package home

import (
	"fmt"
	"testing"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// TestTakeOver: n4, the key's home since e2 (n1's before), hears n1 hand
// over a live delegation in e3, an epoch later than the move (n2 left in
// e3, the key stayed at n4). Whatever its holder, the delegation is live
// here until it is released or runs out: no grant to anyone else before
// (a holder the epoch removed is recalled and refused renewal, not
// forgotten: the simulator's seed 17033). A Drained for another move, or
// one arriving once the gate passed by time, hands nothing over.
func TestTakeOver(t *testing.T) {
	n1, n2, n3, n4, e1, e2, e3, key := joinedThenLeft(t)
	tok := fence.Token{Epoch: 1, Incarnation: 1, Counter: 5}
	const remaining = 800 * time.Millisecond
	cases := []struct {
		name     string
		holder   msg.Member
		from, to uint64
		after    time.Duration // since e2 was learned
		held     bool          // the delegation is live at n4 afterwards
		renewOK  bool          // its holder's Renew is answered ok
	}{
		{"holder still a member", n3, 1, 2, 0, true, true},
		{"holder removed in e3", n2, 1, 2, 0, true, false},
		{"another move", n3, 2, 3, 0, false, false},
		{"gate passed by time", n3, 1, 2, 4 * time.Second, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			m := New(Config{Self: n4, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
				MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, start, nil, false)
			m.OnEpoch(start, epoch.Learned{Epoch: e2, Cert: msg.Certificate{Prev: e1}})
			m.OnEpoch(start.Add(10*time.Millisecond), epoch.Learned{Epoch: e3, Cert: msg.Certificate{Prev: e2}})
			now := start.Add(20*time.Millisecond + tc.after)
			m.SetLiveness(now, now.Add(time.Hour))
			m.Ready()
			m.Drained(now, msg.Envelope{From: n1, FromInc: 1, Version: 1, Epoch: 3}, msg.Drained{Key: key, From: tc.from, To: tc.to, ReceiverInc: 1,
				Live: &msg.HandedOver{Token: tok, Holder: tc.holder, HolderInc: 1, Lease: time.Second, Remaining: remaining}})
			got, holder, ok := m.Holding(key)
			if ok != tc.held || (ok && (got != tok || holder != tc.holder.ID)) {
				t.Fatalf("holding %v %s %v, want held=%v", got, holder, ok, tc.held)
			}
			m.Ready()
			m.Renew(now, msg.Envelope{From: tc.holder, FromInc: 1, Version: 1, Epoch: 3}, msg.Renew{Key: key, Token: tok, Attempt: 1, Lease: time.Second})
			if ok := renewedOK(m.Ready().Msgs); ok != tc.renewOK {
				t.Fatalf("renewal answered ok=%v, want %v", ok, tc.renewOK)
			}
			// n1 asks for the key: granted at once only if nothing was
			// taken over; otherwise once the taken-over lease has run out
			// (receipt + remaining + Skew), its holder silent.
			acq := func(at time.Time, attempt uint32) msg.Kind {
				m.Acquire(at, msg.Envelope{From: n1, FromInc: 1, Version: 1, Epoch: 3},
					msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: attempt})
				return answered(m.Ready().Msgs, n1.ID)
			}
			if tc.to != 2 {
				return // the gate still runs: no grant either way
			}
			if k := acq(now, 1); (k == msg.KindGrant) == tc.held {
				t.Fatalf("n1's Acquire answered %v while the delegation is live=%v", k, tc.held)
			}
			if !tc.held {
				return
			}
			if tc.renewOK {
				return // renewed: live for a lease more
			}
			late := now.Add(remaining + 100*time.Millisecond + time.Millisecond)
			m.Tick(late)
			m.Ready()
			if k := acq(late, 2); k != msg.KindGrant {
				t.Fatalf("after the taken-over lease ran out, n1's Acquire answered %v, want a grant", k)
			}
		})
	}
}

// TestTakenOverRecordOutlivesLiveness: n4 takes over a delegation whose
// remaining time runs past n4's own liveness, and its renewal rounds then
// fail for a while. The record is not clamped to that liveness (as its own
// grants are): the holder's lease comes from the old home's grant, which no
// clamp here shortens, so a record dropped at the liveness's end would let
// n4 grant, once its rounds succeed again, while the holder still uses it.
func TestTakenOverRecordOutlivesLiveness(t *testing.T) {
	n1, n2, n3, n4, e1, e2, _, key := joinedThenLeft(t)
	tok := fence.Token{Epoch: 1, Incarnation: 1, Counter: 5}
	const remaining, skew = 800 * time.Millisecond, 100 * time.Millisecond
	start := time.Unix(1000, 0)
	m := New(Config{Self: n4, Inc: 1, EpochLease: 3 * time.Second, Skew: skew,
		MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, start, nil, false)
	m.OnEpoch(start, epoch.Learned{Epoch: e2, Cert: msg.Certificate{Prev: e1}})
	now := start.Add(10 * time.Millisecond)
	m.SetLiveness(now, now.Add(200*time.Millisecond))
	m.Ready()
	m.Drained(now, msg.Envelope{From: n1, FromInc: 1, Version: 1, Epoch: 2}, msg.Drained{Key: key, From: 1, To: 2, ReceiverInc: 1,
		Live: &msg.HandedOver{Token: tok, Holder: n3, HolderInc: 1, Lease: time.Second, Remaining: remaining}})
	if got, _, ok := m.Holding(key); !ok || got != tok {
		t.Fatalf("holding %v %v, want %v", got, ok, tok)
	}
	acq := func(at time.Time, attempt uint32) msg.Kind {
		m.Tick(at)
		m.Ready()
		m.Acquire(at, msg.Envelope{From: n2, FromInc: 1, Version: 1, Epoch: 2},
			msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: attempt})
		return answered(m.Ready().Msgs, n2.ID)
	}
	// The liveness ran out at now+200ms; a round succeeds again at
	// now+500ms, well inside the record (receipt + remaining + Skew).
	back := now.Add(500 * time.Millisecond)
	m.Tick(now.Add(300 * time.Millisecond))
	m.Ready()
	m.SetLiveness(back, back.Add(time.Hour))
	if k := acq(back, 1); k == msg.KindGrant {
		t.Fatalf("n4 granted %s at %v, inside the taken-over delegation's record (to %v)",
			key, back.Sub(start), now.Add(remaining+skew).Sub(start))
	}
	if k := acq(now.Add(remaining+skew+time.Millisecond), 2); k != msg.KindGrant {
		t.Fatalf("after the taken-over record ran out, n2's Acquire answered %v, want a grant", k)
	}
}

// joinedThenLeft: n4 joins in e2 and n2 leaves in e3; key is one that n1
// homes in e1 and n4 in e2 and e3.
func joinedThenLeft(t *testing.T) (n1, n2, n3, n4 msg.Member, e1, e2, e3 msg.Epoch, key string) {
	n1, n2, n3, n4 = mem("n1", 1), mem("n2", 2), mem("n3", 3), mem("n4", 4)
	e1 = msg.Epoch{Number: 1, Members: []msg.Member{n1, n2, n3}, Caps: msg.Caps{Ring: msg.RingV1}}
	e2 = msg.Epoch{Number: 2, Members: []msg.Member{n1, n2, n3, n4}, Caps: msg.Caps{Ring: msg.RingV1}}
	e3 = msg.Epoch{Number: 3, Members: []msg.Member{n1, n3, n4}, Caps: msg.Caps{Ring: msg.RingV1}}
	return n1, n2, n3, n4, e1, e2, e3, movedKey(t, e1, e2, e3)
}

func mem(id string, store uint64) msg.Member {
	return msg.Member{ID: msg.NodeID(id), Store: store, Version: 1}
}

// movedKey is a key homed at n1 in e1 and at n4 in e2 and e3.
func movedKey(t *testing.T, e1, e2, e3 msg.Epoch) string {
	r1, r2, r3 := epoch.NewRing(e1), epoch.NewRing(e2), epoch.NewRing(e3)
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("k%d", i)
		h1, _ := r1.Home(k)
		h2, _ := r2.Home(k)
		h3, _ := r3.Home(k)
		if h1.ID == "n1" && h2.ID == "n4" && h3.ID == "n4" {
			return k
		}
	}
	t.Fatal("no key moves from n1 to n4")
	return ""
}

func renewedOK(out []msg.Envelope) bool {
	for _, env := range out {
		if r, ok := env.Body.(msg.RenewReply); ok {
			return r.OK
		}
	}
	return false
}

// answered is the kind of the first message to id that answers a request.
func answered(out []msg.Envelope, id msg.NodeID) msg.Kind {
	for _, env := range out {
		if env.To == id && (env.Body.Kind() == msg.KindGrant || env.Body.Kind() == msg.KindWait) {
			return env.Body.Kind()
		}
	}
	return 0
}

// TestTakeOverOwnRecord: a key leaves n4 (e2, to n1) with n3's delegation
// live and comes back (e3). n4 still keeps its own record of it, which n1
// extended meanwhile: the Drained that hands it back extends n4's record
// (same token), or replaces it when n1 has granted a newer one since. In
// neither case does n4 grant before the handed-back delegation's end.
func TestTakeOverOwnRecord(t *testing.T) {
	n1, n2, n3, n4, e1, e2, e3, key := awayAndBack()
	for _, newer := range []bool{false, true} {
		t.Run(fmt.Sprintf("newer=%v", newer), func(t *testing.T) {
			now := time.Unix(1000, 0)
			m, tok := grantedInE1(t, n4, n3, e1, key, now)
			m.OnEpoch(now.Add(10*time.Millisecond), epoch.Learned{Epoch: e2, Cert: msg.Certificate{Prev: e1}})
			at := now.Add(20 * time.Millisecond)
			m.OnEpoch(at, epoch.Learned{Epoch: e3, Cert: msg.Certificate{Prev: e2}})
			m.SetLiveness(at, at.Add(time.Hour))
			live := tok
			if newer {
				live = fence.Token{Epoch: 2, Incarnation: 1, Counter: 1}
			}
			m.Drained(at, msg.Envelope{From: n1, FromInc: 1, Version: 1, Epoch: 3}, msg.Drained{Key: key, From: 2, To: 3, ReceiverInc: 1,
				Live: &msg.HandedOver{Token: live, Holder: n3, HolderInc: 1, Lease: time.Second, Remaining: 3 * time.Second}})
			if got, _, ok := m.Holding(key); !ok || got != live {
				t.Fatalf("holding %v %v, want %v", got, ok, live)
			}
			// Past n4's own record (granted at now for 1s + Skew), well
			// inside the handed-back one (at + 3s + Skew).
			late := at.Add(2 * time.Second)
			m.Tick(late)
			m.Ready()
			m.Acquire(late, msg.Envelope{From: n2, FromInc: 1, Version: 1, Epoch: 3}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
			if k := answered(m.Ready().Msgs, n2.ID); k == msg.KindGrant {
				t.Fatalf("n4 granted %s while the delegation it took back may be live", key)
			}
		})
	}
}

// TestNoRenewOfHandedOverRecord: a key leaves n4 (e2, to n1) and n4 hands
// n3's running delegation over; the key comes back (e3) before n1 has said
// what became of it. n1, still home in e2 as far as it knows, may have
// extended the delegation and may end it, so n4's own record is no longer
// n4's to renew: it asks n1 (seed 747,749, where renewing it let two
// delegations be live at once).
func TestNoRenewOfHandedOverRecord(t *testing.T) {
	n1, _, n3, n4, e1, e2, e3, key := awayAndBack()
	now := time.Unix(1000, 0)
	m, tok := grantedInE1(t, n4, n3, e1, key, now)
	m.Ready()

	at := now.Add(10 * time.Millisecond)
	m.OnEpoch(at, epoch.Learned{Epoch: e2, Cert: msg.Certificate{Prev: e1}})
	m.DrainQuery(at, msg.Envelope{From: n1, FromInc: 1, Version: 1, Epoch: 2}, msg.DrainQuery{Key: key, From: 1, To: 2, ReceiverInc: 1})
	handed := false
	for _, env := range m.Ready().Msgs {
		if d, ok := env.Body.(msg.Drained); ok && env.To == n1.ID && d.Live != nil && d.Live.Token == tok {
			handed = true
		}
	}
	if !handed {
		t.Fatalf("n4 did not hand %s's delegation over to n1", key)
	}

	back := at.Add(10 * time.Millisecond)
	m.OnEpoch(back, epoch.Learned{Epoch: e3, Cert: msg.Certificate{Prev: e2}})
	m.SetLiveness(back, back.Add(time.Hour))
	m.Ready()
	m.Renew(back, msg.Envelope{From: n3, FromInc: 1, Version: 1, Epoch: 3}, msg.Renew{Key: key, Token: tok, Attempt: 1, Lease: time.Second})
	out := m.Ready().Msgs
	if renewedOK(out) {
		t.Fatal("n4 renewed the delegation it handed to n1")
	}
	asked := false
	for _, env := range out {
		if q, ok := env.Body.(msg.DrainQuery); ok && env.To == n1.ID && q.From == 2 && q.To == 3 {
			asked = true
		}
	}
	if !asked {
		t.Fatal("n4 did not ask n1 what became of the delegation")
	}
}

// awayAndBack: n1 joins in e2 and leaves in e3; key is one that n4 homes in
// e1 and e3 and n1 in e2.
func awayAndBack() (n1, n2, n3, n4 msg.Member, e1, e2, e3 msg.Epoch, key string) {
	n1, n2, n3, n4 = mem("n1", 1), mem("n2", 2), mem("n3", 3), mem("n4", 4)
	e1 = msg.Epoch{Number: 1, Members: []msg.Member{n2, n3, n4}, Caps: msg.Caps{Ring: msg.RingV1}}
	e2 = msg.Epoch{Number: 2, Members: []msg.Member{n1, n2, n3, n4}, Caps: msg.Caps{Ring: msg.RingV1}}
	e3 = msg.Epoch{Number: 3, Members: []msg.Member{n2, n3, n4}, Caps: msg.Caps{Ring: msg.RingV1}}
	r1, r2 := epoch.NewRing(e1), epoch.NewRing(e2)
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if h1, _ := r1.Home(k); h1.ID == "n4" {
			if h2, _ := r2.Home(k); h2.ID == "n1" {
				key = k
			}
		}
	}
	return n1, n2, n3, n4, e1, e2, e3, key
}

// grantedInE1 is n4's home machine, started at now in e1, which granted
// key to n3 at once.
func grantedInE1(t *testing.T, n4, n3 msg.Member, e1 msg.Epoch, key string, now time.Time) (*Machine, fence.Token) {
	t.Helper()
	m := New(Config{Self: n4, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
		MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
	m.OnEpoch(now, epoch.Learned{Epoch: e1})
	m.SetLiveness(now, now.Add(time.Hour))
	m.Acquire(now, msg.Envelope{From: n3, FromInc: 1, Version: 1, Epoch: 1}, msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
	tok, _, ok := m.Holding(key)
	if !ok {
		t.Fatal("n4 did not grant in e1")
	}
	return m, tok
}
