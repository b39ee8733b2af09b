package core

import "time"

// lagBuckets is how many slices of the look-back window clockLag keeps: the
// window is judged in lagBuckets-1 slices of EpochLease/(lagBuckets-1) each,
// plus the slice now running, so it reaches at most one slice further back
// than it must (a reading remembered a little longer only takes a jump
// sooner).
const lagBuckets = 17

// clockLag remembers the clock readings of the look-back window and reports
// the most the wall clock ran ahead of the lease clock between any of them
// and now (H9). A lease measured from an anchor is too long in true time by
// all the lease clock lagged since that anchor, however many readings that
// lag was spread over: two stalls under the threshold each must still add
// up. Anchors in use are never older than the window (a liveness round's
// send time, EpochLease; a delegation's or an attempt's, MaxLease), so
// readings from before it no longer matter.
//
// Each comparison is between two readings only, bracketed as
// ObserveClocks's are: the wall read after the old lease reading against
// the wall read before the new one. So the measured wall progress is never
// more than the true one, and the errors of many readings (a coarse clock's
// rounding, a driver descheduled between its reads) never add up, either
// into a false jump or into credit that hides a stall. A wall clock stepped
// back does hide one that much longer, for one window (docs/design.md,
// "Clock jumps").
type clockLag struct {
	// origin is the lease reading bucket indexes count from, and wallOrigin
	// the wall reading taken with it; every difference is taken within one
	// clock, from these (a user's Clock may count from year 1, and a
	// difference across the two clocks would saturate). slice is one
	// bucket's width on the lease clock.
	origin, wallOrigin time.Time
	slice              time.Duration
	// last is the index of the newest bucket written: a lease clock that
	// went back (against Clock's contract) stays in it.
	last int64
	// ahead[i%lagBuckets] is, over the readings in bucket i, the most the
	// lease clock had run ahead of the wall clock read after it, since the
	// origins, valid while at[...] == i and set[...].
	ahead [lagBuckets]time.Duration
	at    [lagBuckets]int64
	set   [lagBuckets]bool
}

// reset forgets every reading and starts the window at the lease reading
// now, and the wall reading wall taken with it: after a jump every anchor in
// use is newer than it.
func (c *clockLag) reset(now, wall time.Time, window time.Duration) {
	*c = clockLag{origin: now, wallOrigin: wall, slice: max(window/(lagBuckets-1), 1)}
}

// since is how far the lease clock at lease has run ahead of the wall clock
// at wall, counted from the origins.
func (c *clockLag) since(lease, wall time.Time) time.Duration {
	return lease.Sub(c.origin) - wall.Sub(c.wallOrigin)
}

// add takes a reading of the lease clock (now) between two of the wall
// clock, and returns the most the wall clock ran ahead of the lease clock
// between any earlier reading still in the window and this one (zero when
// it did not).
func (c *clockLag) add(wallBefore, now, wallAfter time.Time) time.Duration {
	i := max(int64(now.Sub(c.origin)/c.slice), c.last)
	c.last = i
	// Since reading k: wall progress (wallBefore − wallAfter_k) less lease
	// progress (now − lease_k), that is ahead_k − since(now, wallBefore).
	cur := c.since(now, wallBefore)
	lag := time.Duration(0)
	for j := range lagBuckets {
		if c.set[j] && c.at[j] > i-lagBuckets {
			lag = max(lag, c.ahead[j]-cur)
		}
	}
	b := i % lagBuckets
	if off := c.since(now, wallAfter); !c.set[b] || c.at[b] != i {
		c.at[b], c.set[b], c.ahead[b] = i, true, off
	} else {
		c.ahead[b] = max(c.ahead[b], off)
	}
	return lag
}
