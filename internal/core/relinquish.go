package core

import (
	"time"

	"github.com/homelock/homelock/msg"
)

// Relinquish drains and releases the delegation this node holds for key, as a
// Recall from its home would: admission stops, the admitted critical section
// (if any) finishes, the store settles, and Release goes to the issuer. The
// root package calls it on Close, so that homes can grant the key again at
// once instead of waiting the lease out. A key not held is a no-op.
func (n *Node) Relinquish(now time.Time, key string) Ready {
	if tok, _, _, ok := n.holder.Holding(key); ok {
		n.holder.Recall(now, msg.Envelope{From: n.cfg.Self, FromInc: n.cfg.Inc}, msg.Recall{Key: key, Token: tok})
	}
	return n.flush(now)
}
