package clustertest

import (
	"flag"
	"testing"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/home"
)

var mutationSeeds = flag.Int("sim.mutseeds", 1000, "seeds each mutation may take to be caught")

// mutations lists the rules whose removal the simulator must notice.
var mutations = []struct {
	name string
	m    Mutations
	// schedule, when set, is the fixed schedule that exposes the rule; the
	// seed then varies only delays and the workload.
	schedule func(seed uint64) SimConfig
	// budget, when set, replaces -sim.mutseeds.
	budget int
}{
	// A live holder renews its lease (anchored right) whether others wait
	// or not, so a lease anchored at a late Grant's receipt only matters if
	// the holder goes silent before its first renewal: rarer than when a
	// recalled section stopped renewing (caught at seed 1094 when added).
	{name: "holder anchors its lease at receipt", m: Mutations{Holder: delegation.Mutations{AnchorAtReceipt: true}}, budget: 4000},
	{name: "incarnation not persisted", m: Mutations{IncarnationNotPersisted: true}},
	{name: "acceptor does not persist its promise", m: Mutations{AcceptorNotPersisted: true},
		schedule: func(seed uint64) SimConfig { return scripted(seed, forgottenAcceptance, noLearnFromN1ToN2) }},
	{name: "new home grants a moved key at once", m: Mutations{Home: home.Mutations{GrantMovedAtOnce: true}}},
	{name: "gate not carried across quick epochs", m: Mutations{Home: home.Mutations{NoGateCarry: true}}},
	{name: "home grants out of FIFO order", m: Mutations{Home: home.Mutations{LIFO: true}}},
	{name: "holder locks in a mixed-version epoch", m: Mutations{Holder: delegation.Mutations{IgnoreVersions: true}}},
	{name: "home refuses to renew a delegation others wait for", m: Mutations{Home: home.Mutations{NoRenewWhileWaited: true}}},
	{name: "section on an idle delegation renews only at its lapse", m: Mutations{Holder: delegation.Mutations{RenewAtLapse: true}}},
}

// TestMutationsAreCaught shows that the checkers can fail: with each rule
// switched off, some seed within the budget breaks an invariant.
func TestMutationsAreCaught(t *testing.T) {
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			budget := *mutationSeeds
			if mu.budget > 0 {
				budget = mu.budget
			}
			for seed := uint64(1); seed <= uint64(budget); seed++ {
				cfg := DefaultSimConfig(seed)
				if mu.schedule != nil {
					cfg = mu.schedule(seed)
				}
				cfg.Mutations = mu.m
				if r := Run(cfg); r.Failed() {
					t.Logf("caught at seed %d: %s", seed, r.Violations[0])
					return
				}
			}
			t.Fatalf("no violation in %d seeds: the checkers cannot see this rule", budget)
		})
	}
}

// TestForgottenAcceptanceSchedule: the fixed schedule that exposes a
// forgetful acceptor passes with durable acceptors.
func TestForgottenAcceptanceSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(scripted(seed, forgottenAcceptance, noLearnFromN1ToN2)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}
