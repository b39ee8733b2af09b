//go:build !homelock_mutations

package home

// Mutations is empty in a build without the homelock_mutations tag: no
// rule of the protocol can be switched off, and the compiler drops every
// check of a switch, each accessor being a constant false
// (internal/mutations; the switches are documented in mutations_on.go).
type Mutations struct{}

func (*Mutations) grantMovedAtOnce() bool          { return false }
func (*Mutations) noGateCarry() bool               { return false }
func (*Mutations) lifo() bool                      { return false }
func (*Mutations) drainWhileGated() bool           { return false }
func (*Mutations) noRestartGate() bool             { return false }
func (*Mutations) renewNonMembers() bool           { return false }
func (*Mutations) waiveRestartWithoutMarker() bool { return false }
func (*Mutations) acceptStaleDrained() bool        { return false }
func (*Mutations) noHandOver() bool                { return false }
func (*Mutations) noRenewWhileWaited() bool        { return false }
func (*Mutations) echoFirstAttempt() bool          { return false }
func (*Mutations) grantPastLiveness() bool         { return false }
func (*Mutations) grantExpiryNoSkew() bool         { return false }
func (*Mutations) renewPastLiveness() bool         { return false }
func (*Mutations) viewPastLiveness() bool          { return false }
func (*Mutations) takeOverWithinLiveness() bool    { return false }
func (*Mutations) keepOwnRecordOnHandBack() bool   { return false }
func (*Mutations) takeOverNoSkew() bool            { return false }
func (*Mutations) renewExpiryNoSkew() bool         { return false }
func (*Mutations) reclaimNoSkew() bool             { return false }
func (*Mutations) releaseAnyToken() bool           { return false }
func (*Mutations) continuityByNodeID() bool        { return false }
func (*Mutations) reclaimByNodeID() bool           { return false }
