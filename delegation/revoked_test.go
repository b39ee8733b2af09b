package delegation

import (
	"testing"
	"time"
)

// TestRevokedSaysWhy: every Revoked event carries a Detail, which the driver
// hands to the section's holder as the reason its section was lost; the
// section's own lease running out and its delegation's running out read
// differently.
func TestRevokedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lease      time.Duration // the section's own (0: the delegation's)
		wantAfter  time.Duration
		wantDetail string
	}{
		{name: "its own lease", lease: 100 * time.Millisecond, wantAfter: 100 * time.Millisecond, wantDetail: DetailLeaseRanOut},
		{name: "the delegation's lease, never renewed", wantAfter: time.Hour * 99 / 100, wantDetail: "delegation lease expired"}, // the holder counts MaxDrift off
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, start := heldMachine(t, "k")
			ev, ok := m.TryAdmit(start, "k", 2, tc.lease)
			if !ok || ev.Kind != Admitted {
				t.Fatalf("TryAdmit = %+v, %v; want an admission", ev, ok)
			}
			m.Ready()
			// Renewals go unanswered: the home is silent.
			for now := start; now.Sub(start) <= 2*time.Hour; {
				d := m.NextDeadline()
				if d.IsZero() {
					t.Fatalf("no deadline left at %v and no Revoked", now.Sub(start))
				}
				now = d
				m.Tick(now)
				for _, e := range m.Ready().Events {
					if e.Kind != Revoked {
						t.Fatalf("at %v: %+v, want only Revoked", now.Sub(start), e)
					}
					if e.Locker != 2 || e.Reason != ReasonLeaseExpired || e.Detail != tc.wantDetail || now.Sub(start) != tc.wantAfter {
						t.Fatalf("at %v: Revoked locker %d reason %d detail %q; want locker 2, ReasonLeaseExpired, %q at %v",
							now.Sub(start), e.Locker, e.Reason, e.Detail, tc.wantDetail, tc.wantAfter)
					}
					return
				}
			}
			t.Fatal("no Revoked within two hours")
		})
	}
}
