//go:build homelock_mutations

package epoch

// Mutations are test-only switches that break one rule each, so that tests can
// show the checkers catch the break. The zero value is the correct protocol.
// They exist only in builds with the homelock_mutations tag
// (internal/mutations); without it Mutations is empty and every accessor
// returns a constant false.
type Mutations struct {
	// LivenessNoDrift measures epoch liveness without shortening it by
	// MaxDrift.
	LivenessNoDrift bool
	// LivenessAtAnswer anchors the liveness a renewal round grants at the
	// answer that completed the majority instead of the round's send.
	LivenessAtAnswer bool
	// AdoptFirstValue makes a proposer adopt the first accepted value a
	// promise reports instead of the one with the highest ballot.
	AdoptFirstValue bool
	// AcceptBelowPromise makes an acceptor accept a ballot below the one it
	// promised (it forgets its promise when the Accept comes).
	AcceptBelowPromise bool
	// CountDuplicateAccepts counts every Accepted reply towards the
	// certificate, duplicates of one acceptor included.
	CountDuplicateAccepts bool
	// AcceptStaleLeave makes a member act on a Leave that may predate its
	// sender's joining again.
	AcceptStaleLeave bool
	// AcceptStaleJoin makes a member act on a Join that predates its
	// sender's last membership.
	AcceptStaleJoin bool
}

func (m *Mutations) livenessNoDrift() bool       { return m.LivenessNoDrift }
func (m *Mutations) livenessAtAnswer() bool      { return m.LivenessAtAnswer }
func (m *Mutations) adoptFirstValue() bool       { return m.AdoptFirstValue }
func (m *Mutations) acceptBelowPromise() bool    { return m.AcceptBelowPromise }
func (m *Mutations) countDuplicateAccepts() bool { return m.CountDuplicateAccepts }
func (m *Mutations) acceptStaleLeave() bool      { return m.AcceptStaleLeave }
func (m *Mutations) acceptStaleJoin() bool       { return m.AcceptStaleJoin }
