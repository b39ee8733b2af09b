package delegation

import (
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// TestGiveWayToASilentHome: a locker with silentFor fails as unavailable
// once the key's home has answered nothing for silentFor, counted from its
// own queueing and from the request's first attempt, and never earlier than
// that or after the home (or another node) answered.
func TestGiveWayToASilentHome(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	other := msg.Member{ID: "n2", Store: 2, Addr: "n2", Version: 1}
	const silent = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		silent time.Duration
		// answer, if set, is what reaches the holder 10 ms after the lock.
		answer func(m *Machine, now time.Time, a msg.Acquire)
		// second queues another locker this long after the first.
		second time.Duration
		// failAt is when the first failure comes (0: none within 2 s),
		// wantDetail part of its detail.
		failAt     time.Duration
		wantReason Reason
		wantDetail string
	}{
		{name: "silent home", silent: silent, failAt: silent, wantReason: ReasonUnavailable, wantDetail: "no answer from home n2 in 300ms"},
		{name: "no silentFor waits for the deadline", failAt: time.Second, wantReason: ReasonUnavailable, wantDetail: "no answer from home n2"},
		{name: "home queues it behind a holder", silent: silent, answer: func(m *Machine, now time.Time, a msg.Acquire) {
			m.Wait(now, msg.Wait{Key: a.Key, Req: a.Req, Attempt: a.Attempt, Reason: msg.WaitHolder})
		}, failAt: time.Second, wantReason: ReasonTimeout, wantDetail: "queued behind another holder"},
		{name: "home in its gate", silent: silent, answer: func(m *Machine, now time.Time, a msg.Acquire) {
			m.Wait(now, msg.Wait{Key: a.Key, Req: a.Req, Attempt: a.Attempt, Reason: msg.WaitGate})
		}, failAt: time.Second, wantReason: ReasonUnavailable, wantDetail: "activation gate"},
		{name: "another node says it is not the home", silent: silent, answer: func(m *Machine, now time.Time, a msg.Acquire) {
			m.NotHome(now, msg.Envelope{From: other, FromInc: 1, Epoch: 1}, msg.NotHome{Key: a.Key, Req: a.Req})
		}, failAt: time.Second, wantReason: ReasonUnavailable, wantDetail: "not the key's home"},
		{name: "a later locker counts from its own queueing", silent: silent, second: 200 * time.Millisecond, failAt: silent, wantReason: ReasonUnavailable, wantDetail: "in 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{Self: self, Inc: 1, MaxDrift: 0.01, MinUseful: time.Millisecond, RetryInterval: 50 * time.Millisecond, Lease: time.Second})
			start := time.Unix(1000, 0)
			m.OnEpoch(start, msg.Epoch{Number: 1, Members: []msg.Member{other}})
			a := lockAsks(t, m, start, "k", tc.silent)
			var (
				failed []Event
				at     []time.Duration
			)
			for now := start; now.Sub(start) <= 2*time.Second; now = now.Add(time.Millisecond) {
				if tc.answer != nil && now.Sub(start) == 10*time.Millisecond {
					tc.answer(m, now, a)
				}
				if tc.second > 0 && now.Sub(start) == tc.second {
					m.Lock(now, "k", 2, now.Add(time.Second), 0, silent)
				}
				if d := m.NextDeadline(); !d.IsZero() && !now.Before(d) {
					m.Tick(now)
				}
				for _, ev := range m.Ready().Events {
					if ev.Kind != Failed {
						t.Fatalf("at %v: %+v, want only failures", now.Sub(start), ev)
					}
					if len(failed) == 0 && now.Sub(start) != tc.failAt {
						t.Fatalf("locker %d failed at %v (%s), want the first failure at %v", ev.Locker, now.Sub(start), ev.Detail, tc.failAt)
					}
					failed, at = append(failed, ev), append(at, now.Sub(start))
				}
			}
			if len(failed) == 0 {
				t.Fatalf("no locker failed, want one at %v", tc.failAt)
			}
			if f := failed[0]; f.Locker != 1 || f.Reason != tc.wantReason || !strings.Contains(f.Detail, tc.wantDetail) {
				t.Fatalf("first failure %+v, want locker 1, reason %d, detail with %q", f, tc.wantReason, tc.wantDetail)
			}
			if tc.second > 0 && (len(failed) != 2 || failed[1].Locker != 2 || at[1] != tc.second+silent) {
				t.Fatalf("failures %+v at %v, want the second locker's at %v", failed, at, tc.second+silent)
			}
		})
	}
}
