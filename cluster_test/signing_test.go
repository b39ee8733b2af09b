package clustertest

import (
	"testing"

	"github.com/homelock/homelock/home"
)

// TestResignedGrantsExercised: the simulated homes sign their grants, and
// lost Grants make them sign a delegation again for a re-sent Grant
// (home.Machine.sign), whose sections' signed grants are checked (G5)
// and, in the guarded seeds, presented to the Guard.
func TestResignedGrantsExercised(t *testing.T) {
	batchGC(t)
	resigned, seeds := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		r := Run(DefaultSimConfig(seed))
		if r.Failed() {
			t.Fatalf("seed %d:\n%s", seed, r.Report())
		}
		if r.Faults["grant_resigned"] > 0 {
			seeds++
		}
		resigned += r.Faults["grant_resigned"]
	}
	t.Logf("%d Grants signed again, in %d of 40 seeds", resigned, seeds)
	if resigned == 0 {
		t.Fatal("no Grant was signed again in 40 seeds: the simulator does not exercise re-signing")
	}
}

// TestSignedGrantChecked: a section handed a grant that is not its own
// delegation's, or none, is a G5 violation.
func TestSignedGrantChecked(t *testing.T) {
	for name, broken := range map[string]func(home.GrantInfo) []byte{
		"another owner": func(g home.GrantInfo) []byte {
			g.Holder.ID += "x"
			b, _ := simRing.Sign(g.Fence(simDomain, simOperation))
			return b
		},
		"another token": func(g home.GrantInfo) []byte {
			g.Token.Counter++
			b, _ := simRing.Sign(g.Fence(simDomain, simOperation))
			return b
		},
		"unsigned": func(home.GrantInfo) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			defer func(old func(home.GrantInfo) []byte) { simSign = old }(simSign)
			simSign = broken
			r := Run(DefaultSimConfig(1))
			for _, v := range r.Violations {
				if v.Invariant == invSignedGrant {
					return
				}
			}
			t.Fatalf("no %q violation; found %v", invSignedGrant, r.Violations)
		})
	}
}
