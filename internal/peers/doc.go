// Package peers interns the (member, incarnation) pairs that the machines'
// per-key state names: the home that issued a delegation, at the holder; the
// node holding one, at the home. A million delegations name a handful of
// peers, so each keeps a four-byte ID of a shared, immutable Peer instead of
// its own copy of the member (ID and address strings, store ID, version) and
// incarnation.
//
// A Table counts references and forgets a peer when the last goes (its ID
// is then reused), so peers that restarted (new incarnations) or left do not
// pile up over a process's life. Like the machines, a Table is not safe for
// concurrent use.
package peers
