package epoch

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// TestLateAnswersGrantFromTheirOwnRound: a loaded home whose renewal answers
// take longer than EpochLease/3 (so a new round has started meanwhile) still
// gains liveness, measured from the send of the round the answers name. Were
// only the newest round counted, it would never regain liveness.
func TestLateAnswersGrantFromTheirOwnRound(t *testing.T) {
	members := []msg.Member{{ID: "a", Store: 1, Version: 1}, {ID: "b", Store: 2, Version: 1}, {ID: "c", Store: 3, Version: 1}}
	e := msg.Epoch{Number: 1, Members: members, Caps: msg.Caps{Ring: msg.RingV1}}
	const lease = 600 * time.Millisecond
	m := New(Config{Self: members[0], EpochLease: lease, MaxDrift: 0.01, RetryInterval: 20 * time.Millisecond,
		PromiseTimeout: time.Second}, State{Learned: &Learned{Epoch: e}})
	t0 := time.Unix(1000, 0)
	first := renewalNonce(t, m.Tick(t0))
	t1 := t0.Add(lease/3 + time.Millisecond)
	second := renewalNonce(t, m.Tick(t1))
	if first == second {
		t.Fatal("the second round reused the first round's nonce")
	}
	answer := func(from msg.Member, nonce uint64, at time.Time) {
		m.Step(at, msg.Envelope{From: from, To: "a", Epoch: 1, Digest: e.Digest(), Version: 1,
			Body: msg.RenewalAnswer{Nonce: nonce, Result: msg.RenewalOK}})
	}
	answer(members[1], first, t1.Add(50*time.Millisecond))
	want := liveEnd(t0, lease, 0.01)
	if got := m.LiveUntil(); !got.Equal(want) {
		t.Fatalf("after a late answer to the first round LiveUntil = %v, want %v (from the first round's send)", got.Sub(t0), want.Sub(t0))
	}
}

func renewalNonce(t *testing.T, o Output) uint64 {
	t.Helper()
	for _, env := range o.Msgs {
		if r, ok := env.Body.(msg.Renewal); ok {
			return r.Nonce
		}
	}
	t.Fatalf("no renewal round started: %+v", o.Msgs)
	return 0
}
