package homelock

import (
	"testing"
	"time"
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
