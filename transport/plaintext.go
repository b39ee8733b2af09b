package transport

import "fmt"

// Plaintext is what a node with a gossip key does with unencrypted gossip.
// Its two steps between the default and no key at all let encryption be
// turned on (or off) across a running cluster by rolling restarts, each
// step's nodes understanding both neighbours' (docs/operations.md):
//
//	no key ⇄ PlaintextSent ⇄ PlaintextAccepted ⇄ PlaintextRefused
type Plaintext uint8

const (
	// PlaintextRefused encrypts and refuses unencrypted gossip: the
	// default, and the only safe steady state with a key.
	PlaintextRefused Plaintext = iota
	// PlaintextAccepted encrypts, and still takes unencrypted gossip from
	// nodes not yet sending with the key.
	PlaintextAccepted
	// PlaintextSent sends unencrypted gossip, and takes either.
	PlaintextSent
)

var plaintextNames = [...]string{PlaintextRefused: "refuse", PlaintextAccepted: "accept", PlaintextSent: "send"}

func (p Plaintext) String() string {
	if int(p) < len(plaintextNames) {
		return plaintextNames[p]
	}
	return fmt.Sprintf("Plaintext(%d)", uint8(p))
}

// ParsePlaintext reads String's form: refuse, accept or send.
func ParsePlaintext(s string) (Plaintext, error) {
	for p, name := range plaintextNames {
		if s == name {
			return Plaintext(p), nil
		}
	}
	return 0, fmt.Errorf("%w: plaintext mode %q: want refuse, accept or send", ErrBadConfig, s)
}
