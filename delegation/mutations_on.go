//go:build homelock_mutations

package delegation

// Mutations are test-only switches that break one rule each, so that tests can
// show the checkers catch the break. The zero value is the correct protocol.
// They exist only in builds with the homelock_mutations tag
// (internal/mutations); without it Mutations is empty and every accessor
// returns a constant false.
type Mutations struct {
	// AnchorAtReceipt measures a lease from the Grant's receipt, not from the
	// send of the attempt it echoes (H6, H22).
	AnchorAtReceipt bool
	// AdmitRecalledGrant keeps admitting under a Grant whose Recall
	// overtook it (H6), not just its head locker once.
	AdmitRecalledGrant bool
	// OwnBarrier settles through the store's barrier hook, without the
	// inherited barrier, even when nothing was admitted, so the release
	// carries the store's own (possibly older) position instead of the
	// inherited one (H18).
	OwnBarrier bool
	// UntaggedHooks accepts a hook completion for any token (H20).
	UntaggedHooks bool
	// IgnoreVersions admits cluster locks in a mixed-version epoch.
	IgnoreVersions bool
	// KeepOldIncReplies makes the driver (core) keep listening to a node's
	// incarnations below one that reclaimed from us (H1, H11).
	KeepOldIncReplies bool
	// RenewAtLapse leaves a section admitted on an idle delegation to the
	// idle delegation's wake-up (its lapse release, 2 × MinUseful before
	// the end) for its first renewal, instead of half the lease (L7).
	RenewAtLapse bool
	// ReclaimLastIncOnly answers a Reclaim with the delegations of the
	// reclaiming node's previous incarnation only (H3).
	ReclaimLastIncOnly bool
	// LeaseNoDrift measures leases without shortening them by MaxDrift, so a
	// holder whose clock runs slow outlives its home's view.
	LeaseNoDrift bool
	// KeepAnchorsOnJump keeps the send times of outstanding attempts across
	// a clock jump, so a Grant answering one sent before the jump anchors
	// at a reading the jump made meaningless (H9).
	KeepAnchorsOnJump bool
	// MissClockJump makes the driver (core) take no wall-clock jump for one:
	// a node whose lease clock stood still keeps the delegations it held and
	// admits under them as though no time had passed (H9).
	MissClockJump bool
	// ForgetClockLag judges each clock reading alone: lags under the
	// jump threshold never add up, so two short stalls of the lease clock
	// leave a lease running past its home's view (H9).
	ForgetClockLag bool
	// IgnoreRecall ignores a Recall that arrives while a critical section
	// runs: the holder keeps admitting its queued lockers.
	IgnoreRecall bool
	// RenewAtIssuer keeps renewing with the home that issued a delegation
	// after its key moved, which refuses: a running section ends at its
	// lease although the new home would take it over (lock protocol v3).
	RenewAtIssuer bool
	// AdmitAfterRecall leaves one more admission after every Recall (an
	// off-by-one in the count of sections left).
	AdmitAfterRecall bool
	// IgnoreRenewRefusal treats a refused renewal as an unanswered one: the
	// holder keeps admitting instead of draining.
	IgnoreRenewRefusal bool
	// RenewAnchorAtReceipt measures a renewed lease from the RenewReply's
	// receipt, not from the send of the Renew it echoes.
	RenewAnchorAtReceipt bool
	// SkipSettle releases a delegation it admitted sections under with the
	// barrier it inherited, without running the store's barrier hook, so the
	// successor's wait hook does not wait for those sections' writes.
	SkipSettle bool
	// GiveWayWhileAnswered gives way (WithHomeSilence) to a home that did
	// answer: a locker queued behind a holder, or waiting out the home's
	// gate, fails as unavailable when it should wait.
	GiveWayWhileAnswered bool
	// GrantToAnyStore takes a Grant stamped with an epoch before this store
	// was a member, so a late Grant to a wiped node's old store is taken by
	// its new store for its own request of the same number (H31).
	GrantToAnyStore bool
}

func (m *Mutations) anchorAtReceipt() bool    { return m.AnchorAtReceipt }
func (m *Mutations) admitRecalledGrant() bool { return m.AdmitRecalledGrant }
func (m *Mutations) ownBarrier() bool         { return m.OwnBarrier }
func (m *Mutations) untaggedHooks() bool      { return m.UntaggedHooks }
func (m *Mutations) ignoreVersions() bool     { return m.IgnoreVersions }

// KeepsOldIncReplies reports KeepOldIncReplies to the driver.
func (m *Mutations) KeepsOldIncReplies() bool   { return m.KeepOldIncReplies }
func (m *Mutations) renewAtLapse() bool         { return m.RenewAtLapse }
func (m *Mutations) reclaimLastIncOnly() bool   { return m.ReclaimLastIncOnly }
func (m *Mutations) leaseNoDrift() bool         { return m.LeaseNoDrift }
func (m *Mutations) ignoreRecall() bool         { return m.IgnoreRecall }
func (m *Mutations) renewAtIssuer() bool        { return m.RenewAtIssuer }
func (m *Mutations) grantToAnyStore() bool      { return m.GrantToAnyStore }
func (m *Mutations) admitAfterRecall() bool     { return m.AdmitAfterRecall }
func (m *Mutations) ignoreRenewRefusal() bool   { return m.IgnoreRenewRefusal }
func (m *Mutations) renewAnchorAtReceipt() bool { return m.RenewAnchorAtReceipt }
func (m *Mutations) skipSettle() bool           { return m.SkipSettle }
func (m *Mutations) keepAnchorsOnJump() bool    { return m.KeepAnchorsOnJump }
func (m *Mutations) giveWayWhileAnswered() bool { return m.GiveWayWhileAnswered }

// MissesClockJump reports MissClockJump to the driver.
func (m *Mutations) MissesClockJump() bool { return m.MissClockJump }

// ForgetsClockLag reports ForgetClockLag to the driver.
func (m *Mutations) ForgetsClockLag() bool { return m.ForgetClockLag }
