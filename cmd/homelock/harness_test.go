package main

import (
	"io"
	"testing"

	"github.com/homelock/homelock/internal/harness"
)

func TestHarnessCheckStatus(t *testing.T) {
	met := []harness.Measure{{Name: "a", Verdict: "pass"}, {Name: "b"}}
	for _, tc := range []struct {
		name     string
		measures []harness.Measure
		check    bool
		want     int
	}{
		{"without --check a miss still exits 0", append(met, harness.Measure{Name: "c", Verdict: "miss"}), false, 0},
		{"every target met", met, true, 0},
		{"a target missed", append(met, harness.Measure{Name: "c", Verdict: "miss"}), true, exitMissed},
		{"a target not measured", append(met, harness.Measure{Name: "c", Verdict: "not measured"}), true, exitMissed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkStatus(&harness.Report{Measures: tc.measures}, tc.check, io.Discard); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
}

func TestHarnessBadFlags(t *testing.T) {
	// Should a bad value get through, the run it starts is short and
	// writes into the test's directory.
	cheap := []string{"--out", t.TempDir(), "--dir", t.TempDir(), "--duration", "10ms", "--delegations", "100"}
	for _, args := range [][]string{{"--repeat", "0"}, {"--nodes", "2"}, {"--parallel", "-1"}, {"--no-such-flag"}} {
		if got := runHarness(append(cheap, args...), io.Discard, io.Discard); got != 2 {
			t.Errorf("harness %v: status %d, want 2", args, got)
		}
	}
}
