package homelock

import (
	"math"
	"testing"
	"time"

	"github.com/homelock/homelock/internal/deadline"
)

// TestBootNanos: bootNanos is t.Sub(bootEpoch), by UnixNano's difference
// near 2000 and by Sub (saturating) far from it, across the edge between.
func TestBootNanos(t *testing.T) {
	edge := time.Unix(bootNanosLastSec, 0)
	for _, tm := range []time.Time{
		{}, // the zero time: Sub saturates
		time.Unix(bootNanosFirstSec, 0), time.Unix(bootNanosFirstSec+1, 0),
		time.Unix(0, 0), bootEpoch, bootEpoch.Add(-time.Nanosecond),
		bootEpoch.Add(27*365*24*time.Hour + 123456789),
		edge.Add(-time.Nanosecond), edge, time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := bootNanos(tm), int64(tm.Sub(bootEpoch)); got != want {
			t.Errorf("bootNanos(%v) = %d, want %d", tm, got, want)
		}
	}
}

// TestInstantBootNanos: the repeat path's conversion of an Instant agrees
// with bootNanos over the Instants' exact range, and saturates, not wraps,
// before it (an overflow would read a lease end from year 1 as centuries
// ahead).
func TestInstantBootNanos(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(1679, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(bootNanosFirstSec, 0),
		time.Unix(0, 0), bootEpoch, bootEpoch.Add(-time.Nanosecond),
		bootEpoch.Add(27*365*24*time.Hour + 123456789), time.Date(2261, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := instantBootNanos(deadline.At(tm)), bootNanos(tm); got != want {
			t.Errorf("instantBootNanos(%v) = %d, want %d", tm, got, want)
		}
	}
	for _, tm := range []time.Time{{}, time.Time{}.Add(time.Hour), time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if got := instantBootNanos(deadline.At(tm)); got != math.MinInt64 {
			t.Errorf("instantBootNanos(%v) = %d, want the far past", tm, got)
		}
	}
}

// TestNowInstant: the repeat path's clock reading, taken without a
// time.Time from the BootClock, is the Instant of Now's reading, for the
// BootClock and for a Clock of the user's.
func TestNowInstant(t *testing.T) {
	fixed := bootEpoch.Add(26*365*24*time.Hour + 987654321)
	for _, c := range []struct {
		name  string
		clock Clock
	}{
		{"boot clock", NewBootClock()},
		{"fixed clock", fixedClock{fixed}},
	} {
		n := &Node{clock: c.clock}
		n.boot, _ = c.clock.(*BootClock)
		before := deadline.At(c.clock.Now())
		got := n.nowInstant()
		after := deadline.At(c.clock.Now())
		if got < before || got > after {
			t.Errorf("%s: nowInstant %d, not between Now's readings %d and %d", c.name, got, before, after)
		}
		if after-before > deadline.Instant(time.Second) {
			t.Errorf("%s: Now's readings %v apart", c.name, time.Duration(after-before))
		}
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time  { return c.t }
func (c fixedClock) Wall() time.Time { return c.t }
