package home

import (
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
// delegation, home"). An entry with its live delegation is 80 bytes, a malloc
// size class: a field more moves it to the next (96). Put what only a
// contended or moving key needs in entryExtra, and what many delegations
// share in their mint, instead.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 80 {
		t.Errorf("entry is %d bytes, over its 80", got)
	}
}

// TestEntryExtraEmpty: empty must see every field of entryExtra, or the
// state in a field it misses would be dropped with the rest (trim).
func TestEntryExtraEmpty(t *testing.T) {
	if !new(entryExtra).empty() {
		t.Fatal("the zero entryExtra is not empty")
	}
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
	self := msg.Member{ID: "n1", Store: 1, Version: 1}
	n2 := msg.Member{ID: "n2", Store: 2, Version: 1}
	e := msg.Epoch{Number: 4, Members: []msg.Member{self, n2}, Caps: msg.Caps{Ring: msg.RingV1}}
	now := time.Unix(1000, 0)
	for _, req := range []msg.RequestID{{Inc: 3, Seq: 7}, {Inc: 2, Seq: 7}, {Inc: 3, Seq: 0}, {Inc: 0, Seq: 5}} {
		m := New(Config{Self: self, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
			MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
		m.OnEpoch(now, epoch.Learned{Epoch: e})
		m.SetLiveness(now, now.Add(time.Hour))
		key := homedKeys(t, m, 1)[0]
		env := msg.Envelope{From: n2, FromInc: 3, Version: 1, Epoch: 4}
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

// TestTokenKeptWhole: an entry keeps the low 32 bits of its token's counter
// and shares the rest in a mint; a counter past 32 bits, and a grant on
// either side of the boundary, still read back whole and distinct.
func TestTokenKeptWhole(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 1, Version: 1}
	n2 := msg.Member{ID: "n2", Store: 2, Version: 1}
	e := msg.Epoch{Number: 4, Members: []msg.Member{self, n2}, Caps: msg.Caps{Ring: msg.RingV1}}
	now := time.Unix(1000, 0)
	m := New(Config{Self: self, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
		MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
	m.OnEpoch(now, epoch.Learned{Epoch: e})
	m.SetLiveness(now, now.Add(time.Hour))
	keys := homedKeys(t, m, 3)
	m.counter = 1<<32 - 2
	env := msg.Envelope{From: n2, FromInc: 3, Version: 1, Epoch: 4}
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
