package core

import "time"

// lagBuckets is how many slices of the look-back window clockLag keeps: the
// window is judged in lagBuckets-1 slices of EpochLease/(lagBuckets-1) each,
// plus the slice now running, so it reaches at most one slice further back
// than it must (a lag remembered a little longer only takes a jump sooner).
const lagBuckets = 17

// clockLag adds up, reading after reading, how far wall time ran ahead of
// the lease clock, and reports the most it ran ahead since any reading in
// the look-back window (H9). A lease measured from an anchor is too long in
// true time by what the lease clock lagged since that anchor, however many
// readings the lag was spread over: two stalls under the threshold each must
// still add up. Anchors in use are never older than the window (a liveness
// round's send time, EpochLease; a delegation's or an attempt's, MaxLease),
// so lag from before it no longer matters.
//
// The sum is net: a reading whose lease clock ran ahead of the wall pays
// back earlier lag, as it does for a lease measured across both, and a
// coarse clock's rounding, or a driver descheduled between its reads (the
// lease clock then looks ahead), cancels out instead of adding up into a
// false jump. A wall clock stepped back pays back too, which it should not:
// the price of the rest (docs/design.md, "Clock jumps").
type clockLag struct {
	// sum is the net lag over every reading since the last reset.
	sum time.Duration
	// origin is the lease reading bucket indexes count from; slice is one
	// bucket's width on the lease clock.
	origin time.Time
	slice  time.Duration
	// last is the index of the newest bucket written: a lease clock that
	// went back (against Clock's contract) stays in it.
	last int64
	// low[i%lagBuckets] is the least sum at the start of a reading in bucket
	// i, valid while at[...] == i and set[...].
	low [lagBuckets]time.Duration
	at  [lagBuckets]int64
	set [lagBuckets]bool
}

// reset starts the window afresh at the lease reading now: after a jump
// every anchor in use is newer than the reading that took it.
func (c *clockLag) reset(now time.Time, window time.Duration) {
	*c = clockLag{origin: now, slice: max(window/(lagBuckets-1), 1)}
}

// add records a reading at lease time now, whose wall clock ran ahead of the
// lease clock by ahead since the previous reading, and returns the most the
// wall ran ahead since any reading still in the window (at least ahead).
func (c *clockLag) add(now time.Time, ahead time.Duration) time.Duration {
	i := max(int64(now.Sub(c.origin)/c.slice), c.last)
	c.last = i
	// The lag since the previous reading is this one's ahead: record the sum
	// before it, so that an anchor taken between the two readings counts it.
	b := i % lagBuckets
	if !c.set[b] || c.at[b] != i {
		c.at[b], c.set[b], c.low[b] = i, true, c.sum
	} else {
		c.low[b] = min(c.low[b], c.sum)
	}
	c.sum += ahead
	lag := ahead
	for j := range lagBuckets {
		if c.set[j] && c.at[j] > i-lagBuckets {
			lag = max(lag, c.sum-c.low[j])
		}
	}
	return lag
}
