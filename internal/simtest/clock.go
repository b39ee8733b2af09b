package simtest

import "time"

// Clock is a node's clock: local = Base + Offset + (true − Base) × Rate.
// It keeps counting while the process is paused or down, like
// CLOCK_BOOTTIME. Base is in Unix nanoseconds.
//
// Local and True work in Unix nanoseconds: time.Time.Sub checks for
// overflow with an Add and an Equal, and harnesses convert several times
// per event. The results are those of base.Add(offset + (t−base)×rate) and
// its inverse for any time within centuries.
type Clock struct {
	Base   int64
	Offset time.Duration
	Rate   float64
}

// NewClock is a clock counting from base, offset ahead and rate times as
// fast as true time.
func NewClock(base time.Time, offset time.Duration, rate float64) Clock {
	return Clock{Base: base.UnixNano(), Offset: offset, Rate: rate}
}

// Local is the clock's reading at true time t.
func (c Clock) Local(t time.Time) time.Time {
	return time.Unix(0, c.Base+int64(c.Offset)+int64(float64(t.UnixNano()-c.Base)*c.Rate))
}

// True is the true time at which the clock reads l.
func (c Clock) True(l time.Time) time.Time {
	return time.Unix(0, c.Base+int64(float64(l.UnixNano()-c.Base-int64(c.Offset))/c.Rate))
}
