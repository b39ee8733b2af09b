package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clockReading is one driver step's readings, as offsets from hBase: the
// wall clock, the lease clock, the wall clock again.
type clockReading struct{ wallBefore, lease, wallAfter time.Duration }

// TestObserveClocks is the clock jump rule (H9): a jump is taken when wall
// time, measured from any reading still in the window (EpochLease), after
// the lease clock's, to this step's before it, ran ahead of the lease clock
// by more than JumpAfter; never on the first reading, never twice for one
// jump.
func TestObserveClocks(t *testing.T) {
	ms := time.Millisecond
	s := time.Second
	j := JumpAfter(hSkew, hDrift)
	third := j/3 + ms // three of them pass j, two do not
	// lagging is one reading per second from 0 to last, the lease clock
	// lagging the wall by lag at each reading listed in at (seconds).
	lagging := func(last int, lag time.Duration, at ...int) []clockReading {
		var rs []clockReading
		var behind time.Duration
		for i := 0; i <= last; i++ {
			for _, a := range at {
				if a == i {
					behind += lag
				}
			}
			w := time.Duration(i) * s
			rs = append(rs, clockReading{w, w - behind, w})
		}
		return rs
	}
	for _, tc := range []struct {
		name     string
		readings []clockReading
		ahead    time.Duration // of the last reading; zero when no jump
	}{
		{"first reading has nothing to compare", []clockReading{{10 * s, 0, 10 * s}}, 0},
		{"clocks in step", []clockReading{{0, 0, 0}, {s, s, s}}, 0},
		{"lease clock ahead", []clockReading{{0, 0, 0}, {s, 2 * s, s}}, 0},
		{"wall ahead by JumpAfter", []clockReading{{0, 0, 0}, {s + j, s, s + j}}, 0},
		{"wall ahead by more than JumpAfter", []clockReading{{0, 0, 0}, {s + j + ms, s, s + j + ms}}, j + ms},
		// The step was descheduled after its lease reading: the wall
		// reading after it is late, and the next step measures from it.
		{"descheduled after the lease reading", []clockReading{{0, 0, s}, {s + ms, ms, s + ms}}, 0},
		// Descheduled before this step's lease reading: the wall reading
		// before it is early, so wall progress looks smaller, not larger.
		{"descheduled before the lease reading", []clockReading{{0, 0, 0}, {ms, s, s}}, 0},
		{"one jump is taken once", []clockReading{{0, 0, 0}, {s, 0, s}, {2 * s, s, 2 * s}}, 0},
		{"a second jump is taken again", []clockReading{{0, 0, 0}, {s, 0, s}, {3 * s, s, 3 * s}}, s},
		// Each stall alone is under JumpAfter; together they are over it
		// (the rule before this one judged each reading alone).
		{"two stalls add up", lagging(3, j/2+ms, 1, 3), j + 2*ms},
		{"three stalls in the window add up", lagging(5, third, 1, 3, 5), 3 * third},
		{"stalls a window apart do not", lagging(10, j/2+ms, 1, 8), 0},
		// A jump forgets the lag that led to it: the anchors it measured
		// are gone.
		{"a jump starts the sum over", lagging(3, j/2+ms, 1, 2, 3), 0},
		// A lease clock that ran ahead pays back what it lagged before, as
		// it does for a lease measured across both.
		{"a fast lease clock pays back", []clockReading{{0, 0, 0}, {s, s - third, s}, {2 * s, 2 * s, 2 * s}, {3 * s, 3*s - 2*third, 3 * s}}, 0},
		// Rounding of a coarse lease clock: readings alternately late and
		// early by a third of JumpAfter never add up.
		{"rounding does not add up", []clockReading{{0, 0, 0}, {s, s - j/3, s}, {2 * s, 2*s + j/3, 2 * s}, {3 * s, 3*s - j/3, 3 * s}, {4 * s, 4*s + j/3, 4 * s}, {5 * s, 5*s - j/3, 5 * s}}, 0},
		// A driver descheduled for 100 ms between its lease and wall reads
		// makes that step's lease clock look ahead; that must not hide a
		// later stall (a sum of per-step differences would count it as
		// 100 ms paid back).
		{"descheduled reads do not hide a stall", []clockReading{{0, 0, 0}, {s, s, s + 100*ms}, {2 * s, 2*s - j - ms, 2 * s}}, j + ms},
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

// TestObserveClocksFarApartOrigins: a Clock may count its lease time from
// year 1; the rule compares progress within each clock, so the two clocks'
// origins, 2,000 years apart, neither hide a jump nor make one up.
func TestObserveClocksFarApartOrigins(t *testing.T) {
	j := JumpAfter(hSkew, hDrift)
	lease0 := time.Time{}.Add(time.Hour)
	for _, tc := range []struct {
		stall time.Duration
		ahead time.Duration
	}{{j, 0}, {j + time.Millisecond, j + time.Millisecond}} {
		n := memberNode(m1, time.Time{}, m1, m2, m3)
		n.ObserveClocks(hBase, lease0, hBase)
		w := hBase.Add(time.Second)
		_, ahead := n.ObserveClocks(w, lease0.Add(time.Second-tc.stall), w)
		require.Equal(t, tc.ahead, ahead, "a stall of %v", tc.stall)
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
