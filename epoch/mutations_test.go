//go:build homelock_mutations

package epoch

import (
	"flag"
	"testing"

	"github.com/homelock/homelock/msg"
)

var (
	flagMut     = flag.Int("epoch.mutseeds", 1000, "seeds a mutation check may use to find its violation")
	flagMutLong = flag.Bool("epoch.mutlong", false, "also run the slow simulator search for forgotten promises")
)

// The rule-off halves of the named regression schedules: each schedule
// passes with its rule (the test of the same name without RuleOff) and must
// show the failure with the rule switched off by its knob, so the test is
// known to test something. The knobs exist only with this build tag.

func withKnob(knob *bool, on bool, f func()) {
	old := *knob
	*knob = on
	defer func() { *knob = old }()
	f()
}

func TestForgottenPromiseForksRuleOff(t *testing.T) {
	withKnob(&testSkipPersistPromise, true, func() {
		must(t, forgottenPromiseSchedule(t), "the schedule must fork when promises are not persisted")
	})
}

func TestForgottenAcceptanceForksRuleOff(t *testing.T) {
	withKnob(&testSkipPersistAccept, true, func() {
		must(t, forgottenAcceptanceSchedule(t), "the schedule must fork when acceptances are not persisted")
	})
}

func TestH7OneRoundPerMajorityRuleOff(t *testing.T) {
	withKnob(&testMixRounds, true, func() {
		must(t, h7Schedule(t), "mixing rounds would grant it")
	})
}

func TestH14NoRenewalForNonMembersRuleOff(t *testing.T) {
	withKnob(&testRenewNonMember, true, func() {
		equal(t, msg.RenewalOK, h14Schedule(t))
	})
}

func TestH15NoSelfCountAfterPromiseRuleOff(t *testing.T) {
	withKnob(&testCountSelfAfterPromise, true, func() {
		must(t, h15Schedule(t))
	})
}

func TestH16StrayPromiseCompletedRuleOff(t *testing.T) {
	withKnob(&testNoStrayTimeout, true, func() {
		mustNot(t, h16Schedule(t), "without the rule the stray promise blocks epoch 2 forever")
	})
}

func TestH17WipedDiskIsNoAcceptorRuleOff(t *testing.T) {
	withKnob(&testIgnoreStore, true, func() {
		must(t, h17Schedule(t), "membership by node ID alone forks epoch 2")
	})
}

func TestH21JoinReplacesEntryRuleOff(t *testing.T) {
	withKnob(&testJoinByIDOnly, true, func() {
		e := h21Schedule(t)
		x, _ := e.Member("x")
		equal(t, testCfg("x").Self.Store, x.Store, "without the rule the old store stays forever")
	})
}

func TestCertificateOneBallotRuleOff(t *testing.T) {
	withKnob(&testMixBallots, true, func() { must(t, certificateOneBallot()) })
}

// firstFailingSeed runs seeds 1..n with a knob switched on and returns the
// first seed that violates an invariant.
func firstFailingSeed(t *testing.T, knob *bool, n int) (uint64, error) {
	t.Helper()
	*knob = true
	defer func() { *knob = false }()
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if _, err := runSeed(seed); err != nil {
			return seed, err
		}
	}
	return 0, nil
}

// The mutation checks: with a rule switched off, the simulator must find a
// violation within 1,000 seeds, so a green TestSimAgreement means something.
//
// A forgotten promise or acceptance forks only under a narrow interleaving
// (two proposers that cannot hear each other, a crash right after the answer,
// the Learn lost) that the random regimes hit about once in 2,000-5,000
// seeds: plain go test proves those knobs with the fixed schedules
// TestForgottenPromiseForks and TestForgottenAcceptanceForks, and these
// searches run with -epoch.mutlong (add -epoch.mutseeds=20000).
func TestSimCatchesForgottenPromise(t *testing.T) {
	if !*flagMutLong {
		t.Skip("with -epoch.mutlong (TestForgottenPromiseForks covers the knob)")
	}
	seed, err := firstFailingSeed(t, &testSkipPersistPromise, *flagMut)
	if err == nil {
		t.Fatal("the simulator did not notice promises that a crash forgets")
	}
	t.Logf("caught at seed %d: %v", seed, err)
}

func TestSimCatchesForgottenAcceptance(t *testing.T) {
	if !*flagMutLong {
		t.Skip("with -epoch.mutlong (TestForgottenAcceptanceForks covers the knob)")
	}
	seed, err := firstFailingSeed(t, &testSkipPersistAccept, *flagMut)
	if err == nil {
		t.Fatal("the simulator did not notice acceptances that a crash forgets")
	}
	t.Logf("caught at seed %d: %v", seed, err)
}

func TestSimCatchesSelfCountAfterPromise(t *testing.T) {
	seed, err := firstFailingSeed(t, &testCountSelfAfterPromise, *flagMut)
	if err == nil {
		t.Fatal("the simulator did not notice a home counting itself after promising n+1 (H15)")
	}
	t.Logf("caught at seed %d: %v", seed, err)
}
