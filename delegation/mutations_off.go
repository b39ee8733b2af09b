//go:build !homelock_mutations

package delegation

// Mutations is empty in a build without the homelock_mutations tag: no
// rule of the protocol can be switched off, and the compiler drops every
// check of a switch, each accessor being a constant false
// (internal/mutations; the switches are documented in mutations_on.go).
type Mutations struct{}

func (*Mutations) anchorAtReceipt() bool    { return false }
func (*Mutations) admitRecalledGrant() bool { return false }
func (*Mutations) ownBarrier() bool         { return false }
func (*Mutations) untaggedHooks() bool      { return false }
func (*Mutations) ignoreVersions() bool     { return false }

// KeepsOldIncReplies is false: the driver never keeps an old incarnation's
// replies.
func (*Mutations) KeepsOldIncReplies() bool   { return false }
func (*Mutations) renewAtLapse() bool         { return false }
func (*Mutations) reclaimLastIncOnly() bool   { return false }
func (*Mutations) leaseNoDrift() bool         { return false }
func (*Mutations) ignoreRecall() bool         { return false }
func (*Mutations) renewAtIssuer() bool        { return false }
func (*Mutations) grantToAnyStore() bool      { return false }
func (*Mutations) admitAfterRecall() bool     { return false }
func (*Mutations) ignoreRenewRefusal() bool   { return false }
func (*Mutations) renewAnchorAtReceipt() bool { return false }
func (*Mutations) skipSettle() bool           { return false }
func (*Mutations) keepAnchorsOnJump() bool    { return false }
func (*Mutations) giveWayWhileAnswered() bool { return false }

// MissesClockJump is false: the driver takes every clock jump it sees.
func (*Mutations) MissesClockJump() bool { return false }

// ForgetsClockLag is false: the driver adds the lease clock's lag up
// across readings.
func (*Mutations) ForgetsClockLag() bool { return false }
