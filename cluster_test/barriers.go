package clustertest

import "strconv"

// The store's positions, as far as barriers go. Each node's store has its
// own replica position per key: the version of its last committed write,
// or of the barrier its wait hook caught up with, whichever is newer. Its
// barrier hook returns that position, as a store whose replica may lag the
// key's newest write does; reads still see the newest value (the fenced
// register), so only the barriers handed on can show a lag. The
// independent checker's B1 (lockcheck) judges the barriers released.

func barrierOf(pos int) []byte { return strconv.AppendInt(nil, int64(pos), 10) }

// storePos is node n's replica position for key.
func (n *simNode) storePos(key string) int {
	if p, ok := n.store[key]; ok {
		return p
	}
	return 0
}

// storeAt moves n's replica position for key up to pos.
func (n *simNode) storeAt(key string, pos int) {
	if n.store == nil {
		n.store = make(map[string]int)
	}
	if pos > n.store[key] {
		n.store[key] = pos
	}
}
