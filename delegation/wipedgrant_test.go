package delegation

import (
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// TestGrantOnlyForThisStore: a holder takes a Grant only if it was stamped
// in an epoch where this process's store was already a member. A wiped
// node's new store numbers its requests as its old store did, so a late
// Grant to the old store can match the new store's request; it was granted
// before the new store was a member (H31).
func TestGrantOnlyForThisStore(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 2, Addr: "n1", Version: 1}
	old := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	n2 := msg.Member{ID: "n2", Store: 7, Addr: "n2", Version: 1}
	with := func(number uint64, n1 msg.Member) msg.Epoch {
		return msg.Epoch{Number: number, Members: []msg.Member{n1, n2}}
	}
	for _, tc := range []struct {
		name       string
		epochs     []msg.Epoch
		grantEpoch uint64
		taken      bool
	}{
		{"a member since epoch 1, granted in it", []msg.Epoch{with(1, self)}, 1, true},
		{"the epoch lists the old store", []msg.Epoch{with(1, old)}, 1, false},
		{"a member since epoch 2, granted in epoch 1", []msg.Epoch{with(1, old), with(2, self)}, 1, false},
		{"a member since epoch 2, granted in it", []msg.Epoch{with(1, old), with(2, self)}, 2, true},
		{"a member since epoch 2, granted in epoch 3", []msg.Epoch{with(1, old), with(2, self), with(3, self)}, 3, true},
		{"no member yet, granted in an epoch it has not learned", []msg.Epoch{with(1, old)}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{Self: self, Inc: 1, MaxDrift: 0.01, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond, Lease: time.Hour})
			now := time.Unix(1000, 0)
			for _, e := range tc.epochs {
				m.OnEpoch(now, e)
			}
			a := lockAsks(t, m, now, "k", 0)
			home := msg.Envelope{From: n2, FromInc: 1}
			m.Grant(now, home, msg.Grant{Key: "k", Req: a.Req, Attempt: a.Attempt, Token: fence.Token{Epoch: tc.grantEpoch, Incarnation: 1, Counter: 4}, Lease: time.Hour})
			taken := false
			for _, ev := range m.Ready().Events {
				taken = taken || ev.Kind == Admitted
			}
			if taken != tc.taken {
				t.Fatalf("Grant in epoch %d taken: %v, want %v", tc.grantEpoch, taken, tc.taken)
			}
		})
	}
}
