package homelock

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock/internal/deadline"
)

// Clock is the time source a Node measures leases with.
//
// Now must never go back and must keep counting while the machine is
// suspended: a lease measured on a clock that stops during suspend would still
// look valid after a resume (H9). Wall is the wall clock; the node compares
// its progress with Now's on every step, and if wall time has outrun Now by
// more than Config.Skew less MaxDrift since any reading in the last
// EpochLease, it drops every delegation it holds.
type Clock interface {
	Now() time.Time
	Wall() time.Time
}

// BootClock is the default Clock: CLOCK_BOOTTIME, which keeps counting during
// suspend (Go's monotonic clock does not).
//
// Reading CLOCK_BOOTTIME is a system call (hundreds of nanoseconds in some
// sandboxes), too slow for the zero-message fast path. So BootClock reads it
// once, then derives Now from Go's vDSO monotonic clock plus the measured
// boot-minus-monotonic offset, and reads CLOCK_BOOTTIME again whenever wall
// time and monotonic time have moved apart by more than resyncAfter since the
// last reading. A suspend moves them apart by its length (the wall clock
// counts it, the monotonic clock does not), so the offset is refreshed on the
// first reading after a resume; NTP slewing moves them apart slowly and costs
// an occasional extra system call.
type BootClock struct {
	base   time.Time    // a reading of Go's clock, with its monotonic part
	offset atomic.Int64 // boot-time ns − monotonic ns since base
	wallAt atomic.Int64 // wall ns − monotonic ns since base, at the last sync
}

// resyncAfter is how far wall and monotonic progress may diverge before
// BootClock reads CLOCK_BOOTTIME again.
const resyncAfter = int64(time.Millisecond)

// bootEpoch anchors boot-clock readings as time.Time values; only
// differences between readings mean anything.
var bootEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// bootEpochNanos is bootEpoch as UnixNano.
var bootEpochNanos = bootEpoch.UnixNano()

// The seconds (Unix) between which bootNanos's subtraction cannot overflow:
// about 1716 to 2255.
const (
	bootNanosFirstSec = -8_000_000_000
	bootNanosLastSec  = 9_000_000_000
)

// bootNanos is t as nanoseconds since bootEpoch, the form the lock paths
// keep in atomics: t.Sub(bootEpoch), saturating likewise far from 2000, but
// by UnixNano's difference near it. On the repeat path Sub's general case
// (a wall-clock difference, checked for overflow through Add and Equal)
// cost 6 to 8 ns a call.
func bootNanos(t time.Time) int64 {
	if s := t.Unix(); s > bootNanosFirstSec && s < bootNanosLastSec {
		return t.UnixNano() - bootEpochNanos
	}
	return int64(t.Sub(bootEpoch))
}

// instantBootNanos is bootNanos for an Instant, as the repeat path keeps
// its times: nanoseconds since bootEpoch, saturating far in the past (a
// Clock of the user's may count from year 1; the subtraction would wrap
// round to a lease end far in the future).
func instantBootNanos(i deadline.Instant) int64 {
	ns := i.UnixNano()
	if ns < math.MinInt64+bootEpochNanos {
		return math.MinInt64
	}
	return ns - bootEpochNanos
}

// NewBootClock returns a BootClock.
func NewBootClock() *BootClock {
	c := &BootClock{base: time.Now()}
	c.sync(c.base)
	return c
}

func (c *BootClock) sync(t time.Time) {
	mono := int64(t.Sub(c.base))
	boot, ok := readBootClock()
	if !ok {
		// Without CLOCK_BOOTTIME (not Linux): the monotonic clock, which
		// stops during suspend; the wall-clock jump check still catches a
		// resume.
		boot = mono
	}
	// The offset only grows (a suspend adds to it); keeping the maximum
	// keeps Now from going back by the jitter of two readings.
	for off := boot - mono; ; {
		old := c.offset.Load()
		if off <= old && old != 0 || c.offset.CompareAndSwap(old, off) {
			break
		}
	}
	c.wallAt.Store(t.UnixNano() - mono)
}

// Now implements Clock.
func (c *BootClock) Now() time.Time {
	return bootEpoch.Add(time.Duration(c.sinceEpoch()))
}

// sinceEpoch is Now as nanoseconds since bootEpoch, the form the repeat
// lock compares and stores: building the time.Time (Time.Add alone was 4–5%
// of that path in a profile) only to convert it back is left out.
func (c *BootClock) sinceEpoch() int64 {
	t := time.Now()
	mono := int64(t.Sub(c.base))
	if d := t.UnixNano() - mono - c.wallAt.Load(); d > resyncAfter || d < -resyncAfter {
		c.sync(t)
	}
	return mono + c.offset.Load()
}

// nowInstant is the node's clock.Now as an Instant, read without a
// time.Time when the clock is the BootClock.
func (n *Node) nowInstant() deadline.Instant {
	if n.boot != nil {
		return deadline.FromUnixNano(bootEpochNanos + n.boot.sinceEpoch())
	}
	return deadline.At(n.clock.Now())
}

// Wall implements Clock.
func (c *BootClock) Wall() time.Time { return time.Now().Round(0) }
