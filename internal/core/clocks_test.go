package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clockReading is one driver step's readings, as offsets from hBase: the
// wall clock, the lease clock, the wall clock again.
type clockReading struct{ wallBefore, lease, wallAfter time.Duration }

// TestObserveClocks is the wall-clock jump rule (H9): a jump is taken when
// wall time, measured from the last step's reading after the lease clock's
// to this step's reading before it, ran ahead of the lease clock by more
// than Skew; never on the first reading, never twice for one jump.
func TestObserveClocks(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		readings []clockReading
		ahead    time.Duration // of the last reading; zero when no jump
	}{
		{"first reading has nothing to compare", []clockReading{{10 * time.Second, 0, 10 * time.Second}}, 0},
		{"clocks in step", []clockReading{{0, 0, 0}, {time.Second, time.Second, time.Second}}, 0},
		{"lease clock ahead", []clockReading{{0, 0, 0}, {time.Second, 2 * time.Second, time.Second}}, 0},
		{"wall ahead by Skew", []clockReading{{0, 0, 0}, {time.Second + hSkew, time.Second, time.Second + hSkew}}, 0},
		{"wall ahead by more than Skew", []clockReading{{0, 0, 0}, {time.Second + hSkew + ms, time.Second, time.Second + hSkew + ms}}, hSkew + ms},
		// The step was descheduled after its lease reading: the wall
		// reading after it is late, and the next step measures from it.
		{"descheduled after the lease reading", []clockReading{{0, 0, time.Second}, {time.Second + ms, ms, time.Second + ms}}, 0},
		// Descheduled before this step's lease reading: the wall reading
		// before it is early, so wall progress looks smaller, not larger.
		{"descheduled before the lease reading", []clockReading{{0, 0, 0}, {ms, time.Second, time.Second}}, 0},
		{"one jump is taken once", []clockReading{{0, 0, 0}, {time.Second, 0, time.Second}, {2 * time.Second, time.Second, 2 * time.Second}}, 0},
		{"a second jump is taken again", []clockReading{{0, 0, 0}, {time.Second, 0, time.Second}, {3 * time.Second, time.Second, 3 * time.Second}}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := memberNode(m1, time.Time{}, m1, m2, m3)
			var ahead time.Duration
			for _, r := range tc.readings {
				_, ahead = n.ObserveClocks(hBase.Add(r.wallBefore), hBase.Add(r.lease), hBase.Add(r.wallAfter))
			}
			require.Equal(t, tc.ahead, ahead)
		})
	}
}

// TestObserveClocksDropsLiveness: a jump drops the node's epoch liveness
// at once, so it neither homes keys nor trusts its delegations until a new
// round, measured on the clock as it reads now, renews it.
func TestObserveClocksDropsLiveness(t *testing.T) {
	h := newHarness()
	require.NoError(t, h.cmdBootstrap(&args{t: t, kv: map[string][]string{}}))
	n := h.node("n2")
	require.True(t, n.core.LiveUntil().After(n.local(h.now)), "n2 is live before the jump")
	n.core.ObserveClocks(h.now, n.local(h.now), h.now)
	h.now = h.now.Add(time.Second)
	_, ahead := n.core.ObserveClocks(h.now, n.local(h.now.Add(-time.Second)), h.now)
	require.Equal(t, time.Second, ahead)
	require.True(t, n.core.LiveUntil().IsZero() || !n.core.LiveUntil().After(n.local(h.now)), "n2 still live until %v after the jump", n.core.LiveUntil())
}
