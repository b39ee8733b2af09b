package clustertest

import (
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
)

// The simulated homes sign their grants as production's do: the same
// lockGrant.v1 (home.GrantInfo.Fence), under one key ring for the whole
// simulated world. The guarded store's Guard verifies what the holders
// hand their sections, and every admission is checked against it.
const (
	simDomain    = "sim"
	simOperation = "write"

	invSignedGrant = "G5 a section's signed grant is its own delegation's"
)

// simRing signs every simulated grant. It is fixed, so a seed's run does
// not depend on a key (an HMAC is deterministic).
var simRing = func() *fence.KeyRing {
	r := fence.NewKeyRing()
	if err := r.Add("sim", []byte("simulated-home-signing-key-32byt")); err != nil {
		panic(err)
	}
	return r
}()

// simSign signs for the simulated homes; a test may swap it for a broken
// signer to see checkSigned fail.
var simSign = func(g home.GrantInfo) []byte {
	b, err := simRing.Sign(g.Fence(simDomain, simOperation))
	if err != nil {
		panic(err)
	}
	return b
}

// sign is the simulated homes' home.Config.Sign. A delegation signed a
// second time is a re-sent Grant signed again (home.Machine.sign),
// counted as grant_resigned.
func (s *Sim) sign(g home.GrantInfo) []byte {
	if s.signedTokens[g.Token] {
		s.faults["grant_resigned"]++
	} else {
		s.signedTokens[g.Token] = true
	}
	return simSign(g)
}

// checkSigned checks, on admission, that the signed grant the holder hands
// cs verifies and names cs's key, node and delegation: a holder that kept
// another delegation's grant, or a home that signed a re-sent Grant with
// other fields, would hand a Guard a grant for someone else's fence.
func (s *Sim) checkSigned(cs *critical) {
	del := cs.token
	del.Section = 0
	g, err := simRing.Verify(cs.signed)
	switch {
	case err != nil:
		s.check.fail(invSignedGrant, "%s's section on %s under %s has no valid signed grant: %v", cs.node.id, cs.key, cs.token, err)
	case g.Resource != cs.key || g.Owner != string(cs.node.id) || g.Token != del || g.Domain != simDomain || g.Operation != simOperation:
		s.check.fail(invSignedGrant, "%s's section on %s under %s was handed a grant for %s by %s under %s (%s, %s)",
			cs.node.id, cs.key, cs.token, g.Resource, g.Owner, g.Token, g.Domain, g.Operation)
	}
}
