//go:build homelock_mutations

package clustertest

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/internal/simtest/lockcheck"
)

var mutationSeeds = flag.Int("sim.mutseeds", 0, "seeds each mutation may take to be caught (0: the budget its entry states)")

// mutationEntry says what the simulator must catch when one switch is on.
type mutationEntry struct {
	// broken are the invariants whose violation counts (the first one found).
	broken []string
	// seeds is the budget: some seed in 1..seeds must break one of them.
	seeds int
	// schedule, when set, is the fixed schedule that exposes the rule; the
	// seed then varies only delays and the workload.
	schedule func(seed uint64) SimConfig
}

// mutations has one entry per switch in Mutations (home's, the holder's and
// epoch's included), by path. A switch without an entry fails
// TestEveryMutationListed; every entry must be caught by the simulator.
var mutations = map[string]mutationEntry{
	"Home.GrantMovedAtOnce":          {broken: []string{lockcheck.InvHomeView, invExclusion, lockcheck.InvDelegExclusion}, seeds: 50},
	"Home.NoGateCarry":               {broken: []string{lockcheck.InvHomeView, invTokenOrder, lockcheck.InvDelegExclusion, invDeadHolder}, seeds: 400},
	"Home.LIFO":                      {broken: []string{invFIFO, lockcheck.InvFIFOReceipt}, seeds: 20},
	"Home.DrainWhileGated":           {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion, invDeadHolder}, seeds: 1500},
	"Home.NoRestartGate":             {broken: []string{lockcheck.InvHomeView, invTokenOrder, lockcheck.InvDelegExclusion, invDeadHolder}, seeds: 100},
	"Home.RenewNonMembers":           {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, renewedOutsider) }},
	"Home.WaiveRestartWithoutMarker": {broken: []string{lockcheck.InvHomeView, invExclusion, lockcheck.InvDelegExclusion, invDeadHolder}, seeds: 1000},
	"Home.NoHandOver":                {broken: []string{invHeldAlive}, seeds: 5, schedule: func(seed uint64) SimConfig { return fourNodes(seed, homeLeavesUnderSection) }},
	"Holder.RenewAtIssuer":           {broken: []string{invHeldAlive}, seeds: 5, schedule: func(seed uint64) SimConfig { return fourNodes(seed, homeLeavesUnderSection) }},
	"Home.AcceptStaleDrained":        {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fourNodes(seed, staleDrained) }},
	"Home.EchoFirstAttempt":          {broken: []string{lockcheck.InvEcho}, seeds: 50},
	"Holder.AnchorAtReceipt":         {broken: []string{lockcheck.InvHolderLease}, seeds: 20},
	"Holder.AdmitRecalledGrant":      {broken: []string{lockcheck.InvRecall}, seeds: 20},
	"Holder.OwnBarrier":              {broken: []string{lockcheck.InvBarrier}, seeds: 20, schedule: func(seed uint64) SimConfig { return slowHooks(seed, unusedInheritance, 300*time.Millisecond) }},
	"Holder.UntaggedHooks":           {broken: []string{lockcheck.InvBarrier}, seeds: 20, schedule: func(seed uint64) SimConfig { return slowHooks(seed, lateSettle, 1400*time.Millisecond) }},
	"Holder.IgnoreVersions":          {broken: []string{invFailClosed, lockcheck.InvFailClosedEp}, seeds: 100},
	"Holder.KeepOldIncReplies":       {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, lockcheck.InvHolderLease}, seeds: 40, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, lateOldGrant) }},
	"Holder.ReclaimLastIncOnly":      {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, twiceRestartedHome) }},
	"IncarnationNotPersisted":        {broken: []string{lockcheck.InvHomeView, invTokenOrder, invExclusion, lockcheck.InvDelegExclusion}, seeds: 100},
	"AcceptorNotPersisted":           {broken: []string{invEpochFork, invEpochLive}, seeds: 50, schedule: func(seed uint64) SimConfig { return scripted(seed, forgottenAcceptance, noLearnFromN1ToN2) }},
	"LearnedNotPersisted":            {broken: []string{invEpochGrows, invProgress, invTokenOrder, lockcheck.InvHomeView}, seeds: 300},
	"Home.NoRenewWhileWaited":        {broken: []string{invHeldAlive, invHandOn}, seeds: 500}, // seed 379 since lock protocol v3
	"Holder.KeepAnchorsOnJump":       {broken: []string{lockcheck.InvHolderLease, lockcheck.InvHolderFirst, lockcheck.InvDelegExclusion, invExclusion, invTokenOrder}, seeds: 20, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, jumpedAnchor) }},
	"Holder.MissClockJump":           {broken: []string{lockcheck.InvHolderLease, lockcheck.InvDelegExclusion, invExclusion, invEpochLive}, seeds: 100},
	"Holder.ForgetClockLag":          {broken: []string{lockcheck.InvHolderLease, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, addedStalls) }},
	"Holder.RenewAtLapse":            {broken: []string{invRenewOnTime, invHeldAlive}, seeds: 100},

	// Lease and liveness arithmetic.
	"Home.GrantPastLiveness":       {broken: []string{lockcheck.InvLiveness}, seeds: 20},
	"Home.GrantExpiryNoSkew":       {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20},
	"Home.ViewPastLiveness":        {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fiveNodes(seed, stackedLags) }},
	"Home.TakeOverWithinLiveness":  {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 400},
	"Home.KeepOwnRecordOnHandBack": {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fourNodes(seed, keyAwayAndBack) }},
	"Home.ContinuityByNodeID":      {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 5, schedule: func(seed uint64) SimConfig { return fourNodes(seed, wipedHome) }},
	"Holder.GrantToAnyStore":       {broken: []string{lockcheck.InvHolderLease, invTokenOrder, lockcheck.InvDelegExclusion, invExclusion}, seeds: 5, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, staleGrant) }},
	"Home.ReclaimByNodeID":         {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 5, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, staleReclaim) }},
	"Home.TakeOverNoSkew":          {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fourNodes(seed, keyAwayAndBack) }}, // random seeds: 105, 450 once gossip revived refuted deaths
	"Home.RenewPastLiveness":       {broken: []string{lockcheck.InvLiveness}, seeds: 60},
	"Home.RenewExpiryNoSkew":       {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 200},
	"Home.ReclaimNoSkew":           {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion}, seeds: 20, schedule: func(seed uint64) SimConfig { return fixedSchedule(seed, pausedAdoptedHolder) }},
	"Holder.LeaseNoDrift":          {broken: []string{lockcheck.InvHolderLease, lockcheck.InvHolderFirst, lockcheck.InvDelegExclusion}, seeds: 20},
	"Holder.RenewAnchorAtReceipt":  {broken: []string{lockcheck.InvHolderLease, lockcheck.InvHolderFirst, lockcheck.InvDelegExclusion}, seeds: 20},
	"Epoch.LivenessNoDrift":        {broken: []string{lockcheck.InvLiveness, invEpochLive}, seeds: 20},
	"Epoch.AcceptStaleLeave":       {broken: []string{invEpochsBounded}, seeds: 5, schedule: withHealing(heldUpLeave)},
	"Epoch.AcceptStaleJoin":        {broken: []string{invEpochsBounded}, seeds: 5, schedule: withHealing(heldUpJoin)},
	"Epoch.LivenessAtAnswer":       {broken: []string{lockcheck.InvLiveness}, seeds: 200},
	// Recall and release handling.
	"Home.ReleaseAnyToken":    {broken: []string{lockcheck.InvHomeView, lockcheck.InvDelegExclusion, invExclusion}, seeds: 20},
	"Holder.IgnoreRecall":     {broken: []string{lockcheck.InvRecall}, seeds: 20},
	"Holder.AdmitAfterRecall": {broken: []string{lockcheck.InvRecall}, seeds: 20},
	"Holder.SkipSettle":       {broken: []string{lockcheck.InvBarrier}, seeds: 20},
	// Liveness.
	"Holder.GiveWayWhileAnswered": {broken: []string{invProgress}, seeds: 20},
	"Holder.IgnoreRenewRefusal":   {broken: []string{lockcheck.InvRecall}, seeds: 2500},
	// Agreement.
	"Epoch.AdoptFirstValue":       {broken: []string{invEpochFork, lockcheck.InvCertificate}, seeds: 20, schedule: func(seed uint64) SimConfig { return scripted(seed, lostHigherValue, nil) }},
	"Epoch.AcceptBelowPromise":    {broken: []string{invEpochFork, lockcheck.InvCertificate}, seeds: 400},
	"Epoch.CountDuplicateAccepts": {broken: []string{lockcheck.InvCertificate}, seeds: 400},
}

// mutationSwitches lists every bool in Mutations (and in the structs within
// it) by its path, e.g. "Home.LIFO".
func mutationSwitches() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			switch f.Type.Kind() {
			case reflect.Bool:
				out = append(out, prefix+f.Name)
			case reflect.Struct:
				walk(f.Type, prefix+f.Name+".")
			}
		}
	}
	walk(reflect.TypeOf(Mutations{}), "")
	return out
}

// withSwitch returns the Mutations with only the switch at path on.
func withSwitch(path string) Mutations {
	var m Mutations
	v := reflect.ValueOf(&m).Elem()
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	v.SetBool(true)
	return m
}

// TestEveryMutationListed: a new switch needs an entry saying what breaks.
func TestEveryMutationListed(t *testing.T) {
	switches := mutationSwitches()
	for _, sw := range switches {
		if _, ok := mutations[sw]; !ok {
			t.Errorf("switch %s has no entry in mutations", sw)
		}
	}
	for sw := range mutations {
		if !slices.Contains(switches, sw) {
			t.Errorf("entry %s names no switch", sw)
		}
	}
}

// TestMutationsAreCaught shows that the checkers can fail: with each rule
// switched off, some seed within the budget breaks the invariant it guards.
func TestMutationsAreCaught(t *testing.T) {
	for _, sw := range mutationSwitches() {
		mu, ok := mutations[sw]
		if !ok {
			continue // TestEveryMutationListed reports it
		}
		t.Run(sw, func(t *testing.T) {
			budget := mu.seeds
			if *mutationSeeds > 0 {
				budget = *mutationSeeds
			}
			for seed := uint64(1); seed <= uint64(budget); seed++ {
				cfg := DefaultSimConfig(seed)
				// The budgets were measured on 3 to 5 nodes, before seeds
				// picked sizes up to 9.
				cfg.Nodes = 3 + int(seed%3)
				if mu.schedule != nil {
					cfg = mu.schedule(seed)
				}
				cfg.Mutations = withSwitch(sw)
				r := Run(cfg)
				if !r.Failed() {
					continue
				}
				if v := r.Violations[0]; !slices.Contains(mu.broken, v.Invariant) {
					t.Fatalf("seed %d broke %q, not one of %q: %s", seed, v.Invariant, mu.broken, v)
				}
				t.Logf("caught at seed %d: %s", seed, r.Violations[0])
				return
			}
			t.Fatalf("no violation in %d seeds: the checkers cannot see this rule", budget)
		})
	}
}

// withHealing is script's fixed schedule with its healing checks on: M2 is
// what a stale Leave or Join breaks.
func withHealing(script func(*Sim)) func(seed uint64) SimConfig {
	return func(seed uint64) SimConfig {
		cfg := fixedSchedule(seed, script)
		cfg.HealingUnderMutation = true
		return cfg
	}
}
