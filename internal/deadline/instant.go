package deadline

import (
	"math"
	"time"
)

// Instant is a point in time in eight bytes, where a time.Time takes 24: the
// machines keep instants in the state they hold per key, a million times
// over on a busy node. It counts nanoseconds from the earliest instant
// time.UnixNano can express (in 1677), so that the zero Instant is free to
// mean "none", as the zero time.Time does, and no real instant (1970's Unix
// epoch included) collides with it.
//
// Instants from 1678 to 2262 are exact; earlier and later ones saturate,
// which only ever matters for a lease or deadline centuries long. Like
// UnixNano, At drops a monotonic clock reading: the machines' drivers pass
// times without one (the root package's boot clock, the simulator's virtual
// clock), where wall and lease time are the same reading.
type Instant uint64

const (
	minInstant Instant = 1
	maxInstant Instant = math.MaxUint64
	// fromUnix turns UnixNano into an Instant: adding 2⁶³ modulo 2⁶⁴ maps
	// the signed range onto the unsigned one in order.
	fromUnix = 1 << 63
)

// The whole seconds strictly inside UnixNano's range; the ones at its ends
// saturate (which loses at most a second there, centuries away).
const (
	firstSec = math.MinInt64/int64(time.Second) + 1
	lastSec  = math.MaxInt64/int64(time.Second) - 1
)

// At converts t; the zero time.Time becomes the zero Instant. It is on the
// lock fast path: a comparison of seconds guards UnixNano's range.
func At(t time.Time) Instant {
	if t.IsZero() {
		return 0
	}
	switch s := t.Unix(); {
	case s < firstSec:
		return minInstant
	case s > lastSec:
		return maxInstant
	}
	return Instant(uint64(t.UnixNano()) + fromUnix)
}

// FromUnixNano is the Instant ns nanoseconds after the Unix epoch, as
// At(time.Unix(0, ns)) without building the time.Time: the lock fast path
// reads its clock this way. Unlike At it does not saturate: ns must lie
// above math.MinInt64, which would make the zero Instant ("none").
func FromUnixNano(ns int64) Instant { return Instant(uint64(ns) + fromUnix) }

// UnixNano is i as nanoseconds since the Unix epoch (At's inverse for a
// non-zero Instant).
func (i Instant) UnixNano() int64 { return int64(uint64(i) - fromUnix) }

// Time converts i back; the zero Instant becomes the zero time.Time.
func (i Instant) Time() time.Time {
	if i == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(uint64(i)-fromUnix))
}

// IsZero reports whether i is the zero Instant ("none").
func (i Instant) IsZero() bool { return i == 0 }

// Before reports whether i is before j.
func (i Instant) Before(j Instant) bool { return i < j }

// After reports whether i is after j.
func (i Instant) After(j Instant) bool { return i > j }

// Add returns i+d, saturating at the ends of the range.
func (i Instant) Add(d time.Duration) Instant {
	j := i + Instant(d) // modulo 2⁶⁴: a negative d subtracts
	switch {
	case d > 0 && j < i:
		return maxInstant
	case d < 0 && (j > i || j == 0):
		return minInstant
	}
	return j
}

// Sub returns i−j, saturating as time.Time.Sub does.
func (i Instant) Sub(j Instant) time.Duration {
	if i >= j {
		return time.Duration(min(uint64(i-j), math.MaxInt64))
	}
	if d := uint64(j - i); d <= math.MaxInt64 {
		return -time.Duration(d)
	}
	return math.MinInt64
}
