//go:build homelock_mutations

package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/home"
)

// TestSoakCatches: with a rule of the protocol switched off on every real
// node, the soak reports a violation (a soak that stays green with a rule
// off would prove nothing). go test -tags homelock_mutations.
//
// Without the restart gate (Home.NoRestartGate) a killed home grants again
// at once on its restart, while a holder elsewhere still admits under the
// delegation it granted before: the soak sees a token below one admitted
// before it, or two valid handles, usually at the first kill (faults about
// a second apart, kills only, up to 90 s). Switches whose break needs what
// the soak does not do (clock skew, pauses, cut links, a Renew that loses a
// race) are left to the simulator: Home.GrantMovedAtOnce ran 21 kills
// unseen.
func TestSoakCatches(t *testing.T) {
	o := DefaultSoakOptions()
	o.Duration, o.FaultEvery, o.Seed, o.Keys = 90*time.Second, time.Second, 3, 4
	o.KillsOnly, o.StopAtViolation = true, true
	o.Progress = func(e string) { t.Log(e) }
	o.Configure = func(c *homelock.Config) {
		homelock.SetMutations(c, home.Mutations{NoRestartGate: true}, delegation.Mutations{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Soak(ctx, o)
	require.NoError(t, err)
	require.NotEmpty(t, r.Violations, "the soak ran %d sections under %d kills with Home.NoRestartGate and saw nothing", r.Sections, r.Faults["kill"])
	t.Logf("caught: %s", r.Violations[0])
}
