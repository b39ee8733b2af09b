//go:build homelock_mutations

package home

// Mutations are test-only switches that break one rule each, so that tests can
// show the checkers catch the break. The zero value is the correct protocol.
// They exist only in builds with the homelock_mutations tag
// (internal/mutations); without it Mutations is empty and every accessor
// returns a constant false.
type Mutations struct {
	// GrantMovedAtOnce skips the activation gate of a key that moved in.
	GrantMovedAtOnce bool
	// NoGateCarry drops a running gate when the key stays home across epochs (H4).
	NoGateCarry bool
	// LIFO grants the newest waiter first instead of the oldest.
	LIFO bool
	// DrainWhileGated sends Drained without waiting for its own gate (H5, H12).
	DrainWhileGated bool
	// NoRestartGate grants at once after a restart (H2).
	NoRestartGate bool
	// RenewNonMembers keeps renewing delegations of removed members (H14).
	RenewNonMembers bool
	// WaiveRestartWithoutMarker lets a completed reclaim waive the restart
	// gate without the current epoch's gate-passed marker (H19).
	WaiveRestartWithoutMarker bool
	// AcceptStaleDrained lets a Drained for an earlier epoch transition waive
	// the current one (H5: a duplicated old Drained after later epochs).
	AcceptStaleDrained bool
	// NoHandOver never hands a live delegation to a moved key's new home:
	// the rule before lock protocol v3, under which a running section ended
	// at its lease when its key's home left.
	NoHandOver bool
	// NoRenewWhileWaited refuses to renew a delegation others wait for, so
	// a running critical section loses its lock at the lease's end: the
	// rule before held-while-alive, which the simulator's check catches.
	NoRenewWhileWaited bool
	// EchoFirstAttempt makes a Grant echo the first attempt of a request
	// instead of the last one received (H22).
	EchoFirstAttempt bool
	// GrantPastLiveness does not clamp a fresh grant's lease to the home's
	// epoch liveness, so a delegation can outlive the epoch gate that bounds it.
	GrantPastLiveness bool
	// GrantExpiryNoSkew measures a grant's home-side expiry without Skew, so
	// a holder whose clock runs slow may still use it when the home re-grants.
	GrantExpiryNoSkew bool
	// RenewPastLiveness does not clamp a renewal's lease to the home's epoch
	// liveness.
	RenewPastLiveness bool
	// ViewPastLiveness clamps grants and renewals to the home's liveness
	// without Skew, so the home's own record of a delegation (lease + Skew)
	// outlives its liveness: with the lag of the home's lease clock, past
	// the next epoch's gate (H9).
	ViewPastLiveness bool
	// TakeOverWithinLiveness clamps the record of a taken-over delegation
	// to the new home's liveness, as its own grants are: a record cut there
	// lets the home grant once its rounds succeed again, while the holder
	// still uses the old home's lease.
	TakeOverWithinLiveness bool
	// KeepOwnRecordOnHandBack leaves this home's own record of a delegation
	// as it was when the delegation comes back to it through a Drained,
	// though the other home may have renewed it past that record's end.
	KeepOwnRecordOnHandBack bool
	// TakeOverNoSkew records a taken-over delegation for its remaining time
	// from receipt without Skew, so a holder whose clock runs slow may still
	// use it when the new home grants the key.
	TakeOverNoSkew bool
	// RenewExpiryNoSkew extends a renewed delegation's home-side expiry
	// without Skew.
	RenewExpiryNoSkew bool
	// ReclaimNoSkew adopts a reclaimed delegation for its remaining lease
	// without Skew.
	ReclaimNoSkew bool
	// ReleaseAnyToken frees a key's delegation on a Release of any token for
	// the key, so a duplicated Release of an earlier delegation frees the
	// current one.
	ReleaseAnyToken bool
	// ContinuityByNodeID judges continuity by node ID alone, so a wiped
	// disk under its old ID takes the old store's epochs for its own (H25).
	ContinuityByNodeID bool
	// ReclaimByNodeID frees the delegations of a node's earlier
	// incarnations on a Reclaim from any store under its node ID, so a late
	// Reclaim from a wiped node's old store frees what its new store holds
	// (H30).
	ReclaimByNodeID bool
}

func (m *Mutations) grantMovedAtOnce() bool          { return m.GrantMovedAtOnce }
func (m *Mutations) noGateCarry() bool               { return m.NoGateCarry }
func (m *Mutations) lifo() bool                      { return m.LIFO }
func (m *Mutations) drainWhileGated() bool           { return m.DrainWhileGated }
func (m *Mutations) noRestartGate() bool             { return m.NoRestartGate }
func (m *Mutations) renewNonMembers() bool           { return m.RenewNonMembers }
func (m *Mutations) waiveRestartWithoutMarker() bool { return m.WaiveRestartWithoutMarker }
func (m *Mutations) acceptStaleDrained() bool        { return m.AcceptStaleDrained }
func (m *Mutations) noHandOver() bool                { return m.NoHandOver }
func (m *Mutations) noRenewWhileWaited() bool        { return m.NoRenewWhileWaited }
func (m *Mutations) echoFirstAttempt() bool          { return m.EchoFirstAttempt }
func (m *Mutations) grantPastLiveness() bool         { return m.GrantPastLiveness }
func (m *Mutations) grantExpiryNoSkew() bool         { return m.GrantExpiryNoSkew }
func (m *Mutations) renewPastLiveness() bool         { return m.RenewPastLiveness }
func (m *Mutations) viewPastLiveness() bool          { return m.ViewPastLiveness }
func (m *Mutations) takeOverWithinLiveness() bool    { return m.TakeOverWithinLiveness }
func (m *Mutations) keepOwnRecordOnHandBack() bool   { return m.KeepOwnRecordOnHandBack }
func (m *Mutations) takeOverNoSkew() bool            { return m.TakeOverNoSkew }
func (m *Mutations) renewExpiryNoSkew() bool         { return m.RenewExpiryNoSkew }
func (m *Mutations) reclaimNoSkew() bool             { return m.ReclaimNoSkew }
func (m *Mutations) releaseAnyToken() bool           { return m.ReleaseAnyToken }
func (m *Mutations) continuityByNodeID() bool        { return m.ContinuityByNodeID }
func (m *Mutations) reclaimByNodeID() bool           { return m.ReclaimByNodeID }
