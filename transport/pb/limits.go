package pb

// Bounds that Encode and Decode enforce. A receiver allocates at most
// MaxEnvelopeSize for one envelope, and every variable-length field is bounded
// so that a corrupt or hostile peer cannot make one message cost a node more
// than its own cluster's configuration would.
const (
	// MaxEnvelopeSize bounds one encoded envelope. The largest legitimate
	// message is Learn with two epochs of MaxMembers members each, well below.
	MaxEnvelopeSize = 4 << 20
	// MaxKeyLen bounds a lock key.
	MaxKeyLen = 1 << 10
	// MaxBarrierLen bounds a store's freshness barrier.
	MaxBarrierLen = 4 << 10
	// MaxSignedLen bounds a signed grant (lockGrant.v1 is far smaller).
	MaxSignedLen = 4 << 10
	// MaxIDLen bounds a node ID.
	MaxIDLen = 255
	// MaxAddrLen bounds a member's transport address.
	MaxAddrLen = 255
	// MaxMembers bounds the members of an epoch and the acceptors of a
	// certificate.
	MaxMembers = 1024
	// MaxHeld bounds the delegations listed in one ReclaimAnswer; a sender
	// with more must split its answer (MaxEnvelopeSize may bind first).
	MaxHeld = 16384
)
