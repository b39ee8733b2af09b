package clustertest

import (
	"flag"
	"testing"
	"time"
)

var (
	simSeeds = flag.Int("sim.seeds", 300, "seeds TestSimSeeds runs")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this seed (replay), with its full trace")
)

// TestSimSeeds runs seeded schedules of the real state machines under
// faults and checks every invariant at every step.
func TestSimSeeds(t *testing.T) {
	if *simSeed != 0 {
		cfg := DefaultSimConfig(*simSeed)
		cfg.Trace = true
		r := Run(cfg)
		for _, l := range r.Trace {
			t.Log(l)
		}
		if r.Failed() {
			t.Fatal(r.Report())
		}
		return
	}
	start := time.Now()
	for seed := uint64(1); seed <= uint64(*simSeeds); seed++ {
		r := Run(DefaultSimConfig(seed))
		if r.Failed() {
			t.Fatal(r.Report())
		}
	}
	t.Logf("%d seeds in %v", *simSeeds, time.Since(start))
}
