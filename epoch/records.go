package epoch

import "github.com/homelock/homelock/msg"

// Epoch is the agreed membership; the value type lives in msg so that
// messages can carry it.
type Epoch = msg.Epoch

// AcceptorRecord is an acceptor's durable state for the instance that chooses
// epoch Instance. It must be synced before any reply that depends on it leaves
// (docs/design.md: a restarted acceptor that forgot an acceptance lets two epochs
// live at once).
type AcceptorRecord struct {
	Instance uint64
	Promised msg.Ballot
	Accepted msg.Ballot
	// Value is the accepted epoch; nil while nothing is accepted.
	Value *msg.Epoch
}

// Learned is the durable learned epoch with the certificate that proves it was
// chosen. A node acts on an epoch only after this record is synced (H10).
type Learned struct {
	Epoch msg.Epoch
	Cert  msg.Certificate
}

// State is the epoch machine's durable state as loaded from the store at start.
type State struct {
	Acceptor []AcceptorRecord
	// Learned is nil for a node that has learned no epoch yet.
	Learned *Learned
}
