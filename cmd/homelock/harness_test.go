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
