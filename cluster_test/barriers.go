package clustertest

import (
	"strconv"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// The store's positions, as far as barriers go. Each node's store has its
// own replica position per key: the version of its last committed write,
// or of the barrier its wait hook caught up with, whichever is newer. Its
// barrier hook returns that position, as a store whose replica may lag the
// key's newest write does; reads still see the newest value (the fenced
// register), so only the barriers handed on can show a lag.

// invBarrier: a barrier handed on never goes backwards. A holder that
// releases with a barrier states one at least the one it inherited and at
// least its own writes' position; otherwise its successor's wait hook may
// return before the store caught up with writes made under the lock (H18,
// H20).
const invBarrier = "B1 barriers never go backwards"

// position is a barrier's replica position (-1: none).
func position(b []byte) int {
	if b == nil {
		return -1
	}
	v, err := strconv.Atoi(string(b))
	if err != nil {
		return -1
	}
	return v
}

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

type delegKey struct {
	key   string
	token fence.Token
}

// barriers is what the independent checker knows of each delegation's
// barriers: the one its Grant carried, and its holder's newest write.
type barriers struct {
	inherited map[delegKey][]byte
	written   map[delegKey]int
	// released: the first Release was judged. Later ones answer duplicated
	// Grants or Recalls with whatever barrier the Grant carried, and the
	// home, whose delegation is over, ignores them.
	released map[delegKey]bool
}

func (b *barriers) init() {
	if b.inherited == nil {
		b.inherited, b.written, b.released = make(map[delegKey][]byte), make(map[delegKey]int), make(map[delegKey]bool)
	}
}

func (b *barriers) granted(g msg.Grant) {
	b.init()
	k := delegKey{g.Key, g.Token}
	if _, ok := b.inherited[k]; !ok {
		b.inherited[k] = g.Barrier
	}
}

// wrote records a write committed at version under section token tok.
func (b *barriers) wrote(key string, tok fence.Token, version int) {
	b.init()
	k := delegKey{key, tok.Delegation()}
	b.written[k] = max(b.written[k], version)
}

// released checks B1 on a Release n sent.
func (c *independent) released(n *simNode, r msg.Release) {
	k := delegKey{r.Key, r.Token}
	inh, ok := c.barriers.inherited[k]
	if !ok || c.barriers.released[k] {
		return // never granted as far as the checker saw, or judged
	}
	c.barriers.released[k] = true
	d := c.find(r.Key, r.Token)
	if d == nil || !c.liveAtHome(d) {
		// No home can still hand this barrier on as a clean handoff's: the
		// delegation expired at its home, or its holder's process is gone
		// (this Release answers a Grant or Recall that outlived it), and
		// after an expiry or a holder's crash only exclusion is promised,
		// not freshness (docs/design.md, Successor freshness).
		return
	}
	got := position(r.Barrier)
	if r.Barrier == nil {
		// No barrier stated: the home hands on the one it gave. That is
		// right for a delegation the holder no longer holds (it answers a
		// Recall for a token it lost, as when a delegation expires), not
		// for one it gives back while valid after writing under it.
		if d.holder != c.proc(n) || !c.validAtHolder(d) {
			return
		}
		got = position(inh)
	}
	if want := position(inh); got < want {
		c.fail(invBarrier, "%s released %s %s with barrier %d, below the %d it inherited", n.id, r.Key, r.Token, got, want)
		return
	}
	if w, ok := c.barriers.written[k]; ok && got < w {
		c.fail(invBarrier, "%s released %s %s with barrier %d, below its own write at %d", n.id, r.Key, r.Token, got, w)
	}
}
