package clustertest

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fixed schedules of schedules.go and script.go pass with every rule on;
// mutation_test.go (homelock_mutations tag) shows each fails with the rule it
// targets switched off.

// TestTwiceRestartedHomeSchedule: the fixed schedule that exposes a
// holder answering a reclaim with its last incarnation's delegations only
// passes with the rule on.
func TestTwiceRestartedHomeSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(fixedSchedule(seed, twiceRestartedHome)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestLateOldGrantSchedule: the schedule that delivers an old incarnation's
// Grant after its successor reclaimed passes with the rule on.
func TestLateOldGrantSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		if r := Run(fixedSchedule(seed, lateOldGrant)); r.Failed() {
			t.Fatal(r.Report())
		}
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

// TestPausedAdoptedHolderSchedule: a restarted home that adopted a paused
// holder's delegation waits its lease and Skew out.
func TestPausedAdoptedHolderSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(fixedSchedule(seed, pausedAdoptedHolder)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestPausedHolderAtRestartSchedule: with leases up to the liveness, the
// restart gate covers a paused holder's delegation.
func TestPausedHolderAtRestartSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		if r := Run(longLeases(seed, pausedHolderAtRestart)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestLostHigherValueSchedule: a proposer that hears two accepted values
// adopts the one of the highest ballot, and epoch 2 is chosen once.
func TestLostHigherValueSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(scripted(seed, lostHigherValue, nil)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestUnusedInheritanceSchedule: a holder recalled before it admitted
// anything passes on the barrier it inherited.
func TestUnusedInheritanceSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(slowHooks(seed, unusedInheritance, 300*time.Millisecond)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestLateSettleSchedule: a barrier hook that completes after its
// delegation ended releases nothing.
func TestLateSettleSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(slowHooks(seed, lateSettle, 1400*time.Millisecond)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestRenewedOutsiderSchedule: a home recalls a removed member's
// delegation and refuses its renewals, so a restart that reclaims from the
// new epoch's members only misses nothing.
func TestRenewedOutsiderSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		if r := Run(fixedSchedule(seed, renewedOutsider)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestStaleDrainedSchedule: a Drained for an earlier move of a key does
// not waive its current gate.
func TestStaleDrainedSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		if r := Run(fourNodes(seed, staleDrained)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestJumpedAnchorSchedule: a Grant answering an attempt sent before a
// clock jump is given back, not anchored at the stale reading.
func TestJumpedAnchorSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(fixedSchedule(seed, jumpedAnchor)); r.Failed() {
			t.Fatal(r.Report())
		}
	}
}

// TestAddedStallsSchedule: four stalls of n2's lease clock, each under
// the jump threshold, add up to a jump (H9) before n2's section can outlive
// the delegation its home waits out. Judged one reading at a time, they
// never did: n2's section overlapped n3's by about 130 ms in every seed.
func TestAddedStallsSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := fixedSchedule(seed, addedStalls)
		cfg.Trace = true
		r := Run(cfg)
		if r.Failed() {
			t.Fatal(r.Report())
		}
		if !slices.ContainsFunc(r.Trace, func(l string) bool { return strings.Contains(l, "clock jump n2") }) {
			t.Fatalf("seed %d: n2 took no clock jump:\n%s", seed, r.Report())
		}
	}
}

// TestStackedLagsSchedule: a home whose lease clock lags unseen grants, near
// the end of its liveness, to a holder whose clock lags too, while a new
// epoch moves the key: the home's record of the delegation and the
// delegation end before the new home's gate (D4, D1), because the home's
// record (lease + Skew) ends within its liveness.
// Each seed must reach the clamp: n1's grant to n2 carries less than the
// lease asked for, or the schedule tests nothing.
func TestStackedLagsSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := fiveNodes(seed, stackedLags)
		cfg.Trace = true
		r := Run(cfg)
		if r.Failed() {
			t.Fatal(r.Report())
		}
		clamped := slices.ContainsFunc(r.Trace, func(l string) bool {
			m := clampedGrant.FindStringSubmatch(l)
			if m == nil {
				return false
			}
			d, err := time.ParseDuration(m[1])
			return err == nil && d < simLease
		})
		if !clamped {
			t.Fatalf("seed %d: n1 granted n2 no lease short of its liveness:\n%s", seed, r.Report())
		}
	}
}

var clampedGrant = regexp.MustCompile(`deliver n1->n2 grant k\d+ \S+ req=.*? lease=(\S+) `)

// TestKeyAwayAndBackSchedule: a key comes back to a home that still keeps
// its own record of the delegation it handed over, which the other home
// renewed past that record meanwhile; cut off from the holder, the home
// learns of the renewal only from the hand-back, and must not grant the key
// before its end. Each seed must reach that state (n4 hands the delegation
// back to n1, then n3 gets the key), or the schedule tests nothing.
func TestKeyAwayAndBackSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		cfg := fourNodes(seed, keyAwayAndBack)
		cfg.Trace = true
		r := Run(cfg)
		if r.Failed() {
			t.Fatal(r.Report())
		}
		key, reached := "", false
		for _, l := range r.Trace {
			if m := handedBack.FindStringSubmatch(l); m != nil {
				key = m[1]
			}
			if key != "" && strings.Contains(l, "admit n3 "+key+" ") {
				reached = true
			}
		}
		if !reached {
			t.Fatalf("seed %d: n4 never handed the delegation back before n3 got the key:\n%s", seed, r.Report())
		}
	}
}

var handedBack = regexp.MustCompile(`deliver n4->n1 drained (k\d+) \d+->\d+ live=\S+ holder=n2`)

// TestCutShortSuspend: a suspend that another fault resumes early ends
// there. n2 is suspended (its lease clock stopped) for a second, resumed by
// another fault after 200 ms, runs, and is paused again before the
// suspend's own timer: the stall is the 200 ms it was paused, the jump is
// taken at that resume, and the suspend's timer ends nothing. Before, the
// timer recorded a stall over the time n2 ran in, and its clock went back
// (seed 691,285).
func TestCutShortSuspend(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		var stalls []clockStall
		var at time.Time
		var pausedAtTimer bool
		r := Run(fixedSchedule(seed, func(s *Sim) {
			start := simEpochLease + simSkew + 300*time.Millisecond
			n2 := s.Node("n2")
			s.After(start, func() {
				at = s.now
				s.LockKey("n2", s.keyHomedAt("n1"))
				s.stallSuspend(n2, time.Second)
			})
			s.After(start+200*time.Millisecond, func() { s.Resume("n2") })
			s.After(start+400*time.Millisecond, func() { s.Pause("n2") })
			s.After(start+time.Second+time.Millisecond, func() {
				pausedAtTimer = n2.paused
				stalls = slices.Clone(n2.stalls)
			})
			s.After(start+1500*time.Millisecond, func() { s.Resume("n2") })
		}))
		if r.Failed() {
			t.Fatal(r.Report())
		}
		want := []clockStall{{from: at, to: at.Add(200 * time.Millisecond)}}
		if !slices.Equal(stalls, want) || !pausedAtTimer {
			t.Fatalf("seed %d: stalls %v (paused after the suspend's timer: %v), want %v and still paused", seed, stalls, pausedAtTimer, want)
		}
		if r.Faults["clock_jump_cut_short"] != 1 || r.Faults["clock_jump"] != 1 {
			t.Fatalf("seed %d: faults %v, want one clock jump, cut short", seed, r.Faults)
		}
	}
}

// TestHomeLeavesUnderSection: a section keeps its lock when its
// key's home leaves, or closes (SIGTERM): the old home hands the delegation
// to the new one. On the protocol before lock protocol v3 the section was
// revoked at its lease's end (about 2s after the leave) and n4 admitted then.
// The closed home ends once handed off and starts again.
func TestHomeLeavesUnderSection(t *testing.T) {
	for _, tc := range []struct {
		script func(*Sim)
		closes bool
	}{{homeLeavesUnderSection, false}, {homeClosesUnderSection, true}} {
		for seed := uint64(1); seed <= 10; seed++ {
			homeLeavesUnderSectionRun(t, seed, tc.script, tc.closes)
		}
	}
}

var (
	revokedN2 = regexp.MustCompile(`revoke n2 (k\d+) `)
	admitN2N4 = regexp.MustCompile(`admit (n2|n4) (k\d+) locker=\d+ (\S+) `)
	restartN1 = regexp.MustCompile(` start n1 inc=2 `)
)

func homeLeavesUnderSectionRun(t *testing.T, seed uint64, script func(*Sim), closes bool) {
	t.Helper()
	cfg := fourNodes(seed, script)
	cfg.Trace = true
	r := Run(cfg)
	if r.Failed() {
		t.Fatal(r.Report())
	}
	restarted := slices.ContainsFunc(r.Trace, restartN1.MatchString)
	if closes && (r.Faults["close_handed_off"] != 1 || !restarted) {
		t.Fatalf("seed %d: n1's close did not hand off and start again:\n%s", seed, r.Report())
	}
	var admits []string
	for _, l := range r.Trace {
		if m := revokedN2.FindStringSubmatch(l); m != nil {
			t.Fatalf("seed %d: n2's section on %s was revoked after its home left:\n%s", seed, m[1], r.Report())
		}
		if m := admitN2N4.FindStringSubmatch(l); m != nil {
			admits = append(admits, m[1]+" "+m[3])
		}
	}
	if len(admits) != 2 || !strings.HasPrefix(admits[0], "n2 ") || !strings.HasPrefix(admits[1], "n4 ") {
		t.Fatalf("seed %d: admissions %v, want n2's then n4's", seed, admits)
	}
}

// TestHeldUpMembershipSchedules: a Leave held up in the network until its
// sender has joined again removes nobody; a Join held up until its sender
// has joined another way and left for good adds nobody back.
func TestHeldUpMembershipSchedules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(*Sim)
		line   string // the trace shows the held-up message delivered
	}{
		{"leave", heldUpLeave, "deliver the held-up Leave of n2 to n3"},
		{"join", heldUpJoin, "deliver the held-up Join of n2 to "},
	} {
		for seed := uint64(1); seed <= 10; seed++ {
			cfg := fixedSchedule(seed, tc.script)
			cfg.Trace = true
			r := Run(cfg)
			if r.Failed() {
				t.Fatalf("%s, seed %d: %s", tc.name, seed, r.Report())
			}
			if !slices.ContainsFunc(r.Trace, func(l string) bool { return strings.Contains(l, tc.line) }) {
				t.Fatalf("%s, seed %d: the held-up message was never delivered:\n%s", tc.name, seed, r.Report())
			}
		}
	}
}

// TestLateToAWipedNodeSchedules: a late message from or to a wiped node's
// old store changes nothing its new store holds or is granted (H30: a late
// Reclaim must not free the new store's delegation; H31: a late Grant must
// not be taken by the new store). Each seed must reach every step of its
// schedule, in order.
func TestLateToAWipedNodeSchedules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(*Sim)
		steps  []string
	}{
		{"staleReclaim", staleReclaim, []string{"wipe n1 ", "admit n1 ", "n1->n3 reclaim", "admit n2 "}},
		{"staleGrant", staleGrant, []string{"wipe n1 ", "n3->n1 grant", "admit n2 "}},
	} {
		for seed := uint64(1); seed <= 10; seed++ {
			cfg := fixedSchedule(seed, tc.script)
			cfg.Trace = true
			r := Run(cfg)
			if r.Failed() {
				t.Fatal(r.Report())
			}
			if step := firstUnreached(r.Trace, tc.steps); step != "" {
				t.Fatalf("%s, seed %d: never reached %q after the steps before it:\n%s", tc.name, seed, step, r.Report())
			}
		}
	}
}

// firstUnreached returns the first of steps that no line of trace after
// the previous step's contains ("" when every step was reached in order).
func firstUnreached(trace, steps []string) string {
	i := 0
	for _, l := range trace {
		if i < len(steps) && strings.Contains(l, steps[i]) {
			i++
		}
	}
	if i < len(steps) {
		return steps[i]
	}
	return ""
}

// TestWipedHomeSchedule: a home wiped and back at once under its old ID
// grants its keys only once its gate has passed, after every delegation its
// old store granted (H25). Each seed must reach the state: n1 wiped, then n3
// admitted on the key.
func TestWipedHomeSchedule(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		cfg := fourNodes(seed, wipedHome)
		cfg.Trace = true
		r := Run(cfg)
		if r.Failed() {
			t.Fatal(r.Report())
		}
		wiped, reached := false, false
		for _, l := range r.Trace {
			wiped = wiped || strings.Contains(l, "wipe n1 ")
			if wiped && strings.Contains(l, "admit n3 ") {
				reached = true
			}
		}
		if !reached || r.Faults["wipe"] != 1 {
			t.Fatalf("seed %d: n1 was not wiped before n3 got the key:\n%s", seed, r.Report())
		}
	}
}
