//go:build !homelock_mutations

package epoch

// Mutations is empty in a build without the homelock_mutations tag: no
// rule of the protocol can be switched off, and the compiler drops every
// check of a switch, each accessor being a constant false
// (internal/mutations; the switches are documented in mutations_on.go).
type Mutations struct{}

func (*Mutations) livenessNoDrift() bool       { return false }
func (*Mutations) livenessAtAnswer() bool      { return false }
func (*Mutations) adoptFirstValue() bool       { return false }
func (*Mutations) acceptBelowPromise() bool    { return false }
func (*Mutations) countDuplicateAccepts() bool { return false }
func (*Mutations) acceptStaleLeave() bool      { return false }
func (*Mutations) acceptStaleJoin() bool       { return false }
