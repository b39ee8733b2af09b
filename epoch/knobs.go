//go:build homelock_mutations

package epoch

// Test-only mutation knobs. Each switches one safety rule off so that a test
// can show the rule is what keeps the simulator green (a test that passes
// with the rule off proves nothing). They are unexported, only this
// package's tests set them, and they exist only with the homelock_mutations
// tag: without it they are constant false (knobs_off.go) and the compiler
// drops their checks. Config.Mutations holds the switches that other
// packages' simulators set per node.
var (
	// testSkipPersistPromise: the acceptor does not return a Prepare's promise
	// in Output.Acceptor, so a crash forgets it (the forgetful acceptor, docs/design.md).
	testSkipPersistPromise bool
	// testSkipPersistAccept: likewise for an Accept's acceptance.
	testSkipPersistAccept bool
	// testCountSelfAfterPromise: a renewal round counts the node's own answer
	// even after its acceptor promised a higher instance (H15).
	testCountSelfAfterPromise bool
	// testMixRounds: ok answers of earlier renewal rounds keep counting (H7).
	testMixRounds bool
	// testMixBallots: the proposer counts Accepted replies of any of its
	// ballots towards one certificate (H7's cousin in agreement).
	testMixBallots bool
	// testRenewNonMember: a renewal from a non-member is answered ok (H14).
	testRenewNonMember bool
	// testNoStrayTimeout: a member that saw a promise for n+1 never completes
	// the instance itself (H16).
	testNoStrayTimeout bool
	// testIgnoreStore: membership is checked by node ID only (H17).
	testIgnoreStore bool
	// testJoinByIDOnly: a Join under a node ID already in the epoch counts as
	// reflected, so the entry is never replaced (H21).
	testJoinByIDOnly bool
)
