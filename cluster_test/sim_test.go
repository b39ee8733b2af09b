package clustertest

import (
	"flag"
	"testing"
	"time"
)

var (
	simSeeds = flag.Int("sim.seeds", 1000, "seeds TestSimSeeds runs")
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

// TestSameSeedSameTrace: a run is a pure function of its seed, so a failing
// seed replays exactly.
func TestSameSeedSameTrace(t *testing.T) {
	for _, seed := range []uint64{7, 1234, 99991} {
		a, b := Run(DefaultSimConfig(seed)), Run(DefaultSimConfig(seed))
		if a.TraceHash != b.TraceHash || a.Events != b.Events {
			t.Fatalf("seed %d: two runs differ: hash %x/%x, events %d/%d", seed, a.TraceHash, b.TraceHash, a.Events, b.Events)
		}
		if c := Run(DefaultSimConfig(seed + 1)); c.TraceHash == a.TraceHash {
			t.Fatalf("seeds %d and %d produced the same trace hash", seed, seed+1)
		}
	}
}

// TestFaultKindsExercised: over the default seeds every fault kind occurs.
func TestFaultKindsExercised(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 60; seed++ {
		for k, v := range Run(DefaultSimConfig(seed)).Faults {
			seen[k] += v
		}
	}
	for _, k := range []string{"crash", "restart", "pause", "partition", "partition_oneway", "partition_group",
		"agreed_down", "drop", "duplicate", "delay", "join", "leave", "drift", "hook_hang",
		"crash_after_promise", "proposal_duel", "rolling_upgrade", "gossip_blackout", "partition_repeated",
		"gossip_join", "pause_short",
		"drift_bound", "clock_jump", "suspend", "delay_seconds", "old_replay", "gate_epochs",
		"minority_busy", "boundary_acquire"} {
		if seen[k] == 0 {
			t.Errorf("fault %q never happened in 60 seeds", k)
		}
	}
}

// TestSimHealingBounds reports, over the default seeds, how long membership
// took to heal after the last fault and how many epochs the faults cost
// (the checks themselves run in every seed: healing.go).
func TestSimHealingBounds(t *testing.T) {
	var worst time.Duration
	var worstSeed uint64
	epochs, budget := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		r := Run(DefaultSimConfig(seed))
		if r.Failed() {
			t.Fatal(r.Report())
		}
		if r.HealedAfter > worst {
			worst, worstSeed = r.HealedAfter, seed
		}
		epochs += int(r.Epochs) - 1
		budget += r.EpochBudget
	}
	t.Logf("200 seeds: healed at most %v after the heal (seed %d); %d epochs learned after the first against a budget of %d (%.2f of it)",
		worst, worstSeed, epochs, budget, float64(epochs)/float64(budget))
}
