//go:build homelock_mutations

package clustertest

import (
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/home"
)

// Mutations break one rule each, to show that the checkers catch the break:
// the machines' switches and the simulated disk's. They exist only with the
// homelock_mutations tag (internal/mutations).
type Mutations struct {
	Home   home.Mutations
	Holder delegation.Mutations
	Epoch  epoch.Mutations
	// IncarnationNotPersisted restarts a node with its old incarnation.
	IncarnationNotPersisted bool
	// AcceptorNotPersisted drops acceptor records instead of storing them.
	AcceptorNotPersisted bool
	// LearnedNotPersisted drops learned epochs instead of storing them (H10).
	LearnedNotPersisted bool
}

// Any reports whether any mutation is on.
func (m Mutations) Any() bool { return m != Mutations{} }

func (m Mutations) incarnationNotPersisted() bool { return m.IncarnationNotPersisted }
func (m Mutations) acceptorNotPersisted() bool    { return m.AcceptorNotPersisted }
func (m Mutations) learnedNotPersisted() bool     { return m.LearnedNotPersisted }
