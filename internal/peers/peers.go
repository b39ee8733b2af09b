package peers

import "github.com/homelock/homelock/msg"

// ID names a Peer in its Table; the zero ID names none.
type ID uint32

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
type Table struct {
	peers []*Peer // by ID-1; nil where free
	free  []ID
	ids   map[pair]ID
}

// Ref returns the ID of (m, inc) and counts one more reference to it.
func (t *Table) Ref(m msg.Member, inc uint64) ID {
	k := pair{m, inc}
	id, ok := t.ids[k]
	if !ok {
		if t.ids == nil {
			t.ids = make(map[pair]ID)
		}
		p := &Peer{Member: m, Inc: inc}
		if n := len(t.free); n > 0 {
			id = t.free[n-1]
			t.free = t.free[:n-1]
			t.peers[id-1] = p
		} else {
			t.peers = append(t.peers, p)
			id = ID(len(t.peers))
		}
		t.ids[k] = id
	}
	t.peers[id-1].refs++
	return id
}

// Unref drops one reference to id (a no-op for the zero ID); the last one
// forgets the peer.
func (t *Table) Unref(id ID) {
	if id == 0 {
		return
	}
	p := t.peers[id-1]
	if p.refs--; p.refs == 0 {
		delete(t.ids, pair{p.Member, p.Inc})
		t.peers[id-1] = nil
		t.free = append(t.free, id)
	}
}

// Get returns the peer id names; nil for the zero ID.
func (t *Table) Get(id ID) *Peer {
	if id == 0 {
		return nil
	}
	return t.peers[id-1]
}

// Len is the number of peers referenced.
func (t *Table) Len() int { return len(t.ids) }
