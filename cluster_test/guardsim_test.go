package clustertest

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user and system CPU time: steadier than wall
// time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGuardSeed measures what the guarded store costs a seed that
// runs it: the same seeds with it (on) and without (off).
func BenchmarkGuardSeed(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("guard=%v", on), func(b *testing.B) {
			defer func(e uint64) { guardEvery = e }(guardEvery)
			if !on {
				guardEvery = 1 << 62
			}
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				Run(DefaultSimConfig(uint64(8 * (1 + i%40))))
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestGuardStoreExercised: over forty guarded seeds the guarded store does
// all it is there for, so G3, G4 and G6 judge something: stale writes
// refused, prunes between and at crashes, filter rebuilds, and operation IDs
// sent again, refused while their receipts are kept and taken once pruned.
func TestGuardStoreExercised(t *testing.T) {
	batchGC(t)
	seen := map[string]int{}
	for i := range uint64(40) {
		r := Run(DefaultSimConfig(guardEvery * (i + 1)))
		if r.Failed() {
			t.Fatal(r.Report())
		}
		for k, v := range r.Faults {
			seen[k] += v
		}
	}
	t.Logf("%v", seen)
	for _, k := range []string{"guard", "guard_write", "guard_stale_refused", "store_crash", "guard_prune",
		"guard_filter_rebuild", "guard_duplicate_refused", "guard_reused_accepted"} {
		if seen[k] == 0 {
			t.Errorf("%q never happened in 40 guarded seeds", k)
		}
	}
}

// TestGuardedSeedsReplay: a guarded seed runs the same twice, so a failing
// one can be replayed. Pebble's flushes run on goroutines of their own, so
// what a store crash finds unsynced varies from run to run; the crash's
// choices of what survives must not draw from the stream that picks the
// later writes, prunes and reused operation IDs.
func TestGuardedSeedsReplay(t *testing.T) {
	for i := range uint64(4) {
		seed := guardEvery * (36 + i)
		var traces [2][]string
		for k := range traces {
			cfg := DefaultSimConfig(seed)
			cfg.Trace = true
			r := Run(cfg)
			if r.Failed() {
				t.Fatal(r.Report())
			}
			traces[k] = r.Trace
		}
		if !slices.Equal(traces[0], traces[1]) {
			for j := range min(len(traces[0]), len(traces[1])) {
				if traces[0][j] != traces[1][j] {
					t.Fatalf("seed %d ran two ways; first difference at line %d:\n%s\n%s", seed, j, traces[0][j], traces[1][j])
				}
			}
			t.Fatalf("seed %d ran two ways: %d and %d trace lines", seed, len(traces[0]), len(traces[1]))
		}
	}
}
