package simtest

import (
	"math/rand/v2"
	"time"
)

// Links are the faults of a seeded network between nodes named by K: cut
// directed links, a drop and a duplication probability and a delay model.
// Every draw comes from the caller's *rand.Rand, in a fixed order, so that
// a seed is a schedule.
type Links[K comparable] struct {
	// cut[{a, b}] blocks messages from a to b (asymmetric when only one way).
	cut   map[[2]K]bool
	Drop  float64
	Dup   float64
	Delay Delay
}

// Delay draws one message's delay: Base plus up to Spread, plus, for each
// tail in use, up to Tail.Max more for one message in Tail.OneIn. A tail
// widens the distribution, which also reorders messages.
type Delay struct {
	Base, Spread time.Duration
	Tails        [2]Tail
}

// Tail is a rare extra delay: a congested or retrying link. The zero Tail
// is off and costs no draw.
type Tail struct {
	OneIn int
	Max   time.Duration
}

// Cut blocks messages from a to b.
func (l *Links[K]) Cut(a, b K) {
	if l.cut == nil {
		l.cut = make(map[[2]K]bool)
	}
	l.cut[[2]K{a, b}] = true
}

// Mend unblocks messages from a to b.
func (l *Links[K]) Mend(a, b K) { delete(l.cut, [2]K{a, b}) }

// Blocked says whether a's messages to b are lost. It runs for every
// message; most of the time no link is cut, and then it needs no lookup.
func (l *Links[K]) Blocked(a, b K) bool { return len(l.cut) > 0 && l.cut[[2]K{a, b}] }

// MendAll mends every link.
func (l *Links[K]) MendAll() { clear(l.cut) }

// Heal mends every link and turns drops, duplicates and tails off.
func (l *Links[K]) Heal() {
	clear(l.cut)
	l.Drop, l.Dup = 0, 0
	l.Delay.Tails = [2]Tail{}
}

// Fate decides what becomes of one message from a to b that is not
// blocked: lost (0 copies), delivered once, or twice. It draws the drop,
// then the duplication.
func (l *Links[K]) Fate(r *rand.Rand) (copies int) {
	if r.Float64() < l.Drop {
		return 0
	}
	if r.Float64() < l.Dup {
		return 2
	}
	return 1
}

// Draw is one message's delay.
func (d *Delay) Draw(r *rand.Rand) time.Duration {
	x := d.Base
	if d.Spread > 0 {
		x += time.Duration(r.Int64N(int64(d.Spread)))
	}
	for _, t := range d.Tails {
		if t.OneIn > 0 && t.Max > 0 && r.IntN(t.OneIn) == 0 {
			x += time.Duration(r.Int64N(int64(t.Max)))
		}
	}
	return x
}
