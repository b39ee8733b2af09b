package harness

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/homelock/homelock/internal/leakcheck"
)

// TestRunCancelledLeavesNothing cancels a run on its cluster, as SIGINT
// does: Run must return the cancellation, with its nodes closed (no
// goroutine left) and its data gone.
func TestRunCancelledLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	parent := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := DefaultOptions()
	o.Duration, o.Repeat, o.Dir = 200*time.Millisecond, 1, parent
	var phases []string
	o.Progress = func(phase string) {
		phases = append(phases, phase)
		if phase == "hot key" {
			cancel()
		}
	}
	r, err := Run(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v after %v, want it cancelled", err, phases)
	}
	if m, ok := r.measure("repeat_lock_ns_p50"); !ok || m.Median <= 0 {
		t.Errorf("the phases before the cancel were not reported: %+v", m)
	}
	left, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}
