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
}{
	{name: "holder anchors its lease at receipt", m: Mutations{Holder: delegation.Mutations{AnchorAtReceipt: true}}},
	{name: "incarnation not persisted", m: Mutations{IncarnationNotPersisted: true}},
	{name: "acceptor does not persist its promise", m: Mutations{AcceptorNotPersisted: true},
		schedule: func(seed uint64) SimConfig { return scripted(seed, forgottenAcceptance, noLearnFromN1ToN2) }},
	{name: "new home grants a moved key at once", m: Mutations{Home: home.Mutations{GrantMovedAtOnce: true}}},
	{name: "gate not carried across quick epochs", m: Mutations{Home: home.Mutations{NoGateCarry: true}}},
	{name: "home grants out of FIFO order", m: Mutations{Home: home.Mutations{LIFO: true}}},
	{name: "holder locks in a mixed-version epoch", m: Mutations{Holder: delegation.Mutations{IgnoreVersions: true}}},
}

// TestMutationsAreCaught shows that the checkers can fail: with each rule
// switched off, some seed within the budget breaks an invariant.
func TestMutationsAreCaught(t *testing.T) {
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(*mutationSeeds); seed++ {
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
			t.Fatalf("no violation in %d seeds: the checkers cannot see this rule", *mutationSeeds)
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
