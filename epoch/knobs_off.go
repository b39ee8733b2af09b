//go:build !homelock_mutations

package epoch

// Without the homelock_mutations tag every knob is a constant false
// (knobs.go documents them).
const (
	testSkipPersistPromise    = false
	testSkipPersistAccept     = false
	testCountSelfAfterPromise = false
	testMixRounds             = false
	testMixBallots            = false
	testRenewNonMember        = false
	testNoStrayTimeout        = false
	testIgnoreStore           = false
	testJoinByIDOnly          = false
)
