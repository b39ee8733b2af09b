package epoch

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// A Leave counts only when it cannot predate its sender's joining again:
// sent in the learned epoch, or in the one before if the sender was a
// member of it (the certificate's Prev). Otherwise the receiver proposes
// nothing and teaches the sender its epoch; a leaver that means it asks
// again (seed 527,009: a Leave held up 1.9 s removed a member that had
// rejoined).
func TestStaleLeave(t *testing.T) {
	e2without := msg.Epoch{Number: 2, Members: members("a", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	e2with := msg.Epoch{Number: 2, Members: members("a", "b", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	e3 := msg.Epoch{Number: 3, Members: members("a", "b", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	for _, tc := range []struct {
		name   string
		prev   msg.Epoch
		sentIn uint64
		counts bool
	}{
		{"sent in the learned epoch", e2without, 3, true},
		{"sent in a later epoch", e2without, 4, true},
		{"sent in the epoch before, a member of it", e2with, 2, true},
		{"sent in the epoch before, not a member of it", e2without, 2, false},
		{"sent before it rejoined", e2without, 1, false},
		{"sent two epochs back, a member since", e2with, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testCfg("b").Self
			proposed, taught := fromB(Learned{Epoch: e3, Cert: msg.Certificate{Prev: tc.prev}}, tc.sentIn, msg.Leave{Member: b})
			equal(t, tc.counts, proposed, "proposed an epoch without b")
			equal(t, !tc.counts, taught, "sent b the learned epoch")
		})
	}
}

// A Join counts unless it predates its sender's last membership: the
// sender was in the epoch before the learned one, is not in the learned
// one, and sent the Join before it learned that. Then the receiver proposes
// nothing and teaches the sender its epoch; a joiner that means it asks
// again, naming the learned epoch.
func TestStaleJoin(t *testing.T) {
	with := msg.Epoch{Number: 2, Members: members("a", "b", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	without := msg.Epoch{Number: 2, Members: members("a", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	e3 := msg.Epoch{Number: 3, Members: members("a", "c"), Caps: msg.Caps{Ring: msg.RingV1}}
	for _, tc := range []struct {
		name   string
		prev   msg.Epoch
		sentIn uint64
		counts bool
	}{
		{"left in the learned epoch, asks in it", with, 3, true},
		{"left in the learned epoch, asked before", with, 1, false},
		{"never a member, asked before", without, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testCfg("b").Self
			l := Learned{Epoch: e3, Cert: msg.Certificate{Prev: tc.prev}}
			proposed, taught := fromB(l, tc.sentIn, msg.Join{Member: b})
			equal(t, tc.counts, proposed, "proposed an epoch with b")
			equal(t, !tc.counts, taught, "sent b the learned epoch")
			equal(t, !tc.counts, New(testCfg("c"), State{Learned: &l}).AnswersJoin(tc.sentIn, b), "AnswersJoin")
		})
	}
	// A member that asks to join, as the learned epoch has it, is answered
	// with the epoch too; with another entry (a new address) it is a join.
	b := testCfg("b").Self
	l := Learned{Epoch: msg.Epoch{Number: 3, Members: members("a", "b", "c"), Caps: msg.Caps{Ring: msg.RingV1}}, Cert: msg.Certificate{Prev: with}}
	m := New(testCfg("c"), State{Learned: &l})
	equal(t, true, m.AnswersJoin(1, b), "AnswersJoin of a member")
	moved := b
	moved.Addr = "b:2"
	equal(t, false, m.AnswersJoin(3, moved), "AnswersJoin of a member at a new address")
}

// fromB has c, which learned l, receive body from b, sent in epoch sentIn:
// whether c proposed an epoch, and whether it sent b its own.
func fromB(l Learned, sentIn uint64, body msg.Body) (proposed, taught bool) {
	m := New(testCfg("c"), State{Learned: &l})
	now := time.Unix(100, 0)
	m.Tick(now)
	b := testCfg("b").Self
	out := m.Step(now, msg.Envelope{From: b, To: "c", Epoch: sentIn, Version: b.Version, Body: body})
	for _, env := range out.Msgs {
		switch env.Body.(type) {
		case msg.Prepare:
			proposed = true
		case msg.Learn:
			taught = taught || env.To == "b"
		}
	}
	return proposed, taught
}
