// Package peers interns the (member, incarnation) pairs that the machines'
// per-key state names: the home that issued a delegation, at the holder; the
// node holding one, at the home. A million delegations name a handful of
// peers, so each keeps a pointer to a shared, immutable Peer instead of its
// own copy of the member (ID and address strings, store ID, version) and
// incarnation.
//
// A Table counts references and forgets a peer when the last goes, so
// peers that restarted (new incarnations) or left do not pile up over a
// process's life. Like the machines, a Table is not safe for concurrent use.
package peers

import "github.com/homelock/homelock/msg"

// Peer is one member as one of its incarnations. Read it, never change it:
// every state that names the pair shares it.
type Peer struct {
	msg.Member
	Inc  uint64
	refs int
}

type pair struct {
	m   msg.Member
	inc uint64
}

// Table is a set of interned peers; the zero Table is empty and ready.
type Table struct{ m map[pair]*Peer }

// Ref returns the Peer for (m, inc) and counts one more reference to it.
func (t *Table) Ref(m msg.Member, inc uint64) *Peer {
	k := pair{m, inc}
	p := t.m[k]
	if p == nil {
		if t.m == nil {
			t.m = make(map[pair]*Peer)
		}
		p = &Peer{Member: m, Inc: inc}
		t.m[k] = p
	}
	p.refs++
	return p
}

// Unref drops one reference to p (a no-op for nil); the last one forgets it.
func (t *Table) Unref(p *Peer) {
	if p == nil {
		return
	}
	if p.refs--; p.refs == 0 {
		delete(t.m, pair{p.Member, p.Inc})
	}
}

// Len is the number of peers referenced.
func (t *Table) Len() int { return len(t.m) }
