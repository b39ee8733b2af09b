package clustertest

import (
	"math/rand/v2"
	"time"
)

// network holds the current faults between nodes.
type network struct {
	// cut[a][b] blocks messages from a to b (asymmetric when only one way).
	cut  map[[2]int]bool
	drop float64
	dup  float64
	// slow widens the delay distribution, which also reorders messages.
	slow bool
	// long, when set, holds one message in eight for up to long (seconds:
	// a congested or retrying link).
	long time.Duration
}

func newNetwork() network { return network{cut: make(map[[2]int]bool)} }

// blocked runs for every message and gossip probe; most of the time no link
// is cut, and then it needs no map lookup.
func (n *network) blocked(from, to int) bool { return len(n.cut) > 0 && n.cut[[2]int{from, to}] }

func (n *network) delay(r *rand.Rand) time.Duration {
	d := 200*time.Microsecond + time.Duration(r.Int64N(int64(800*time.Microsecond)))
	if n.slow && r.IntN(4) == 0 {
		d += time.Duration(r.Int64N(int64(150 * time.Millisecond)))
	}
	if n.long > 0 && r.IntN(8) == 0 {
		d += time.Duration(r.Int64N(int64(n.long)))
	}
	return d
}

func (n *network) heal() {
	clear(n.cut)
	n.drop, n.dup, n.slow, n.long = 0, 0, false, 0
}
