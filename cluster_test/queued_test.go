package clustertest

import (
	"strings"
	"testing"
)

// The simulator exercises Acquire.Queued (protocol v2, docs/design.md "The
// hot-key handoff"): its hot keys change hands between nodes whose lockers
// ask again as they release, so queued Acquires are sent, under every fault
// the schedules inject, and no invariant breaks.
func TestQueuedAcquiresExercised(t *testing.T) {
	queued := 0
	traceSeeds(t, 20, func(l string) {
		if strings.Contains(l, "acquire") && strings.Contains(l, "queued=true") {
			queued++
		}
	})
	t.Logf("%d queued acquires in 20 seeds", queued)
	if queued == 0 {
		t.Fatal("no queued Acquire in 20 seeds: the simulator does not exercise the hint")
	}
}

// traceSeeds runs the default schedules of seeds 1 to n with every event
// traced, fails on a violation, and hands visit each trace line.
func traceSeeds(t *testing.T, n uint64, visit func(line string)) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		cfg := DefaultSimConfig(seed)
		cfg.Trace = true
		r := Run(cfg)
		if r.Failed() {
			t.Fatalf("seed %d:\n%s", seed, r.Report())
		}
		for _, l := range r.Trace {
			visit(l)
		}
	}
}
