package clustertest

import (
	"time"

	"github.com/homelock/homelock/internal/simtest"
)

// network holds the current faults between nodes, by node index.
type network = simtest.Links[int]

// The delay tails the faults switch on: slow widens the distribution
// (which also reorders messages), long holds one message in eight for up
// to seconds (a congested or retrying link).
const (
	tailSlow = iota
	tailLong
)

func newNetwork() network {
	return network{Delay: simtest.Delay{Base: 200 * time.Microsecond, Spread: 800 * time.Microsecond}}
}

func (s *Sim) slowNet(on bool) {
	s.net.Delay.Tails[tailSlow] = simtest.Tail{}
	if on {
		s.net.Delay.Tails[tailSlow] = simtest.Tail{OneIn: 4, Max: 150 * time.Millisecond}
	}
}

// longNet holds one message in eight for up to d (0: off).
func (s *Sim) longNet(d time.Duration) {
	s.net.Delay.Tails[tailLong] = simtest.Tail{OneIn: 8, Max: d}
}
