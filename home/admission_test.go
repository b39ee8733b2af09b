package home

import (
	"testing"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// TestAdmission: who a home serves. Versions match exactly, both as the
// epoch records the requester and as its message speaks; a requester that
// forges a matching version in its messages but is recorded with another
// one is refused, as is anyone who is not a member (by node and store ID).
func TestAdmission(t *testing.T) {
	self := msg.Member{ID: "n1", Store: 1, Version: 1}
	v1 := msg.Member{ID: "n2", Store: 2, Version: 1}
	v2 := msg.Member{ID: "n3", Store: 3, Version: 2}
	e := msg.Epoch{Number: 4, Members: []msg.Member{self, v1, v2}, Caps: msg.Caps{Ring: msg.RingV1}}
	now := time.Unix(1000, 0)
	cases := []struct {
		name    string
		from    msg.Member
		version uint32
		want    msg.Kind
		reason  msg.RefuseReason
	}{
		{"member of this version", v1, 1, msg.KindGrant, 0},
		{"member of another version", v2, 2, msg.KindRefused, msg.RefusedVersion},
		{"forged version, recorded as v2", msg.Member{ID: "n3", Store: 3, Version: 1}, 1, msg.KindRefused, msg.RefusedVersion},
		{"speaks v2, recorded as v1", v1, 2, msg.KindRefused, msg.RefusedVersion},
		{"wiped store under a member's ID", msg.Member{ID: "n2", Store: 99, Version: 1}, 1, msg.KindRefused, msg.RefusedNotMember},
		{"unknown node", msg.Member{ID: "n9", Store: 9, Version: 1}, 1, msg.KindRefused, msg.RefusedNotMember},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{Self: self, Inc: 1, EpochLease: 3 * time.Second, Skew: 100 * time.Millisecond,
				MaxLease: time.Second, MinUseful: time.Millisecond, RetryInterval: 10 * time.Millisecond}, now, nil, false)
			m.OnEpoch(now, epoch.Learned{Epoch: e})
			m.SetLiveness(now, now.Add(time.Hour))
			key := homedKeys(t, m, 1)[0]
			m.Acquire(now, msg.Envelope{From: tc.from, FromInc: 1, Version: tc.version, Epoch: 4},
				msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1}, Attempt: 1})
			out := m.Ready().Msgs
			if len(out) != 1 || out[0].Body.Kind() != tc.want {
				t.Fatalf("answered %v, want one %v", out, tc.want)
			}
			if r, ok := out[0].Body.(msg.Refused); ok && r.Reason != tc.reason {
				t.Fatalf("refused for %v, want %v", r.Reason, tc.reason)
			}
		})
	}
}
