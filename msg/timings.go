package msg

import (
	"fmt"
	"time"
)

// Timings are the settings whose safety argument assumes every node runs the
// same values: a new home's activation gate (its own EpochLease + Skew) must
// outlast every delegation an old home granted under its own EpochLease,
// MaxLease, Skew and MaxDrift. A node advertises its Timings in gossip; the
// zero value is a node that advertises none (an earlier release).
type Timings struct {
	EpochLease time.Duration
	MaxLease   time.Duration
	Skew       time.Duration
	MaxDrift   float64
}

// IsZero reports whether t advertises nothing.
func (t Timings) IsZero() bool { return t == Timings{} }

// String is t as an error message shows it.
func (t Timings) String() string {
	return fmt.Sprintf("EpochLease %v, MaxLease %v, Skew %v, MaxDrift %g", t.EpochLease, t.MaxLease, t.Skew, t.MaxDrift)
}
