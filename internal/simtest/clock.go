package simtest

import "time"

// Clock is a node's clock: local = Base + Offset + (true − Base) × Rate.
// It keeps counting while the process is paused or down, like
// CLOCK_BOOTTIME. Base is in Unix nanoseconds.
//
// A script may change the rate or step the clock (Change); readings of
// earlier true times keep the formula in force then, so that a checker
// converting an old send time gets what the node's clock read at it.
//
// Local and True work in Unix nanoseconds: time.Time.Sub checks for
// overflow with an Add and an Equal, and harnesses convert several times
// per event. The results are those of base.Add(offset + (t−base)×rate) and
// its inverse for any time within centuries.
type Clock struct {
	Base   int64
	Offset time.Duration
	Rate   float64
	// from is when the current Offset and Rate took effect (true Unix
	// nanoseconds); past are the segments before, oldest first.
	from int64
	past []segment
}

type segment struct {
	from   int64
	offset time.Duration
	rate   float64
}

// NewClock is a clock counting from base, offset ahead and rate times as
// fast as true time.
func NewClock(base time.Time, offset time.Duration, rate float64) Clock {
	return Clock{Base: base.UnixNano(), Offset: offset, Rate: rate}
}

// Change makes the clock read with offset and rate from true time at on
// (not before the last change).
func (c *Clock) Change(at time.Time, offset time.Duration, rate float64) {
	c.past = append(c.past, segment{from: c.from, offset: c.Offset, rate: c.Rate})
	c.from, c.Offset, c.Rate = at.UnixNano(), offset, rate
}

// Local is the clock's reading at true time t.
func (c *Clock) Local(t time.Time) time.Time {
	x := t.UnixNano()
	if len(c.past) > 0 && x < c.from {
		s := c.segmentAt(x)
		return time.Unix(0, c.Base+int64(s.offset)+int64(float64(x-c.Base)*s.rate))
	}
	return time.Unix(0, c.Base+int64(c.Offset)+int64(float64(x-c.Base)*c.Rate))
}

// True is the true time at which the clock reads l: the latest such time
// when a step back made it read l twice, and the instant it jumped past l
// when a step forward skipped l.
func (c *Clock) True(l time.Time) time.Time {
	x := c.Base + int64(float64(l.UnixNano()-c.Base-int64(c.Offset))/c.Rate)
	if len(c.past) == 0 || x >= c.from {
		return time.Unix(0, x)
	}
	end := c.from
	for i := len(c.past) - 1; i >= 0; i-- {
		s := c.past[i]
		t := c.Base + int64(float64(l.UnixNano()-c.Base-int64(s.offset))/s.rate)
		if t >= s.from && t < end {
			return time.Unix(0, t)
		}
		if t >= end {
			return time.Unix(0, end) // skipped by the step at end
		}
		end = s.from
	}
	return time.Unix(0, x)
}

func (c *Clock) segmentAt(x int64) segment {
	for i := len(c.past) - 1; i > 0; i-- {
		if x >= c.past[i].from {
			return c.past[i]
		}
	}
	return c.past[0]
}
