package clustertest

import (
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// invCertificate: a certificate is what the acceptors said, not what the
// proposer counted. Agreement rests on it (E1), but a fork needs a second
// proposer at the wrong moment; a certificate that names an acceptor twice,
// or one that never accepted the ballot, is wrong the moment it is learned.
const invCertificate = "E3 certificates name a majority that accepted"

// accepts records every Accepted(OK) any process sent, by acceptor,
// instance and ballot.
type accepts map[acceptKey]bool

type acceptKey struct {
	from     msg.NodeID
	instance uint64
	ballot   msg.Ballot
}

// synced records the acceptances a process wrote to its disk: a proposer's
// own acceptor answers it within the step, with no message to observe.
func (a accepts) synced(n *simNode, recs []epoch.AcceptorRecord) {
	for _, r := range recs {
		if !r.Accepted.IsZero() {
			a[acceptKey{n.id, r.Instance, r.Accepted}] = true
		}
	}
}

func (a accepts) sent(from msg.NodeID, b msg.Accepted) {
	if b.OK {
		a[acceptKey{from, b.Instance, b.Ballot}] = true
	}
}

// certified checks the certificate of an epoch n learned: distinct members
// of the previous epoch, a majority of it, each of which sent Accepted for
// the certificate's ballot in instance Epoch.Number.
func (c *independent) certified(n *simNode, l epoch.Learned) {
	if l.Epoch.Number == 0 || l.Cert.Ballot.IsZero() {
		return
	}
	seen := make(map[msg.NodeID]bool, len(l.Cert.Acceptors))
	for _, a := range l.Cert.Acceptors {
		switch {
		case seen[a.ID]:
			c.fail(invCertificate, "%s learned epoch %d with a certificate naming %s twice", n.id, l.Epoch.Number, a.ID)
			return
		case !c.accepts[acceptKey{a.ID, l.Epoch.Number, l.Cert.Ballot}]:
			c.fail(invCertificate, "%s learned epoch %d with a certificate naming %s, which never accepted ballot %v",
				n.id, l.Epoch.Number, a.ID, l.Cert.Ballot)
			return
		}
		seen[a.ID] = true
	}
	if len(seen) < l.Cert.Prev.Majority() {
		c.fail(invCertificate, "%s learned epoch %d from %d acceptors of %d", n.id, l.Epoch.Number, len(seen), len(l.Cert.Prev.Members))
	}
}
