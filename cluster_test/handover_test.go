package clustertest

import (
	"strings"
	"testing"
)

// Random schedules hand live delegations over (Drained with live=), so the
// checker judges the move under every fault; TestHomeLeavesUnderSection
// shows a section running on through one. Most moves under faults come
// while the old home's own gate still runs, so it cannot vouch and the
// delegation is waited out as before.
func TestHandOversExercised(t *testing.T) {
	handed := 0
	traceSeeds(t, 60, func(l string) {
		if strings.Contains(l, " drained ") && strings.Contains(l, " live=") {
			handed++
		}
	})
	t.Logf("60 seeds: %d live delegations handed over", handed)
	if handed == 0 {
		t.Fatal("no live delegation handed over in 60 seeds: the simulator does not exercise the move")
	}
}
