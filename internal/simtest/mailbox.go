package simtest

import (
	"math/rand/v2"
	"slices"
)

// Mailbox is the hand-driven network of fixed schedules and datadriven
// scripts: sent messages wait, in the order sent, until the script
// delivers, drops or holds them, so that a schedule reads like the hazard
// it reproduces.
type Mailbox[M any] struct {
	q []M
}

// Post queues m behind everything sent before it.
func (b *Mailbox[M]) Post(m ...M) { b.q = append(b.q, m...) }

// Len is the number of waiting messages.
func (b *Mailbox[M]) Len() int { return len(b.q) }

// All is every waiting message, oldest first. The slice is the mailbox's
// own: read it, do not keep it across a Post or a Take.
func (b *Mailbox[M]) All() []M { return b.q }

// Take removes and returns the oldest message that match accepts.
func (b *Mailbox[M]) Take(match func(M) bool) (M, bool) {
	i := slices.IndexFunc(b.q, match)
	if i < 0 {
		var zero M
		return zero, false
	}
	m := b.q[i]
	b.q = slices.Delete(b.q, i, i+1)
	return m, true
}

// Drop removes every message that match accepts and says how many.
func (b *Mailbox[M]) Drop(match func(M) bool) int {
	n := len(b.q)
	b.q = slices.DeleteFunc(b.q, match)
	return n - len(b.q)
}

// Index is the position of the oldest message match accepts, -1 for none.
func (b *Mailbox[M]) Index(match func(M) bool) int { return slices.IndexFunc(b.q, match) }

// Insert puts m at position i (0 is the oldest), behind none of those
// before it: a duplicate arrives right after its original.
func (b *Mailbox[M]) Insert(i int, m M) { b.q = slices.Insert(b.q, i, m) }

// Set replaces the message at position i: a reordering.
func (b *Mailbox[M]) Set(i int, m M) { b.q[i] = m }

// TakeAt removes and returns the message at position i.
func (b *Mailbox[M]) TakeAt(i int) M {
	m := b.q[i]
	b.q = slices.Delete(b.q, i, i+1)
	return m
}

// Clear loses every waiting message.
func (b *Mailbox[M]) Clear() { b.q = nil }

// Shuffle puts the waiting messages in an order drawn from r.
func (b *Mailbox[M]) Shuffle(r *rand.Rand) {
	r.Shuffle(len(b.q), func(i, j int) { b.q[i], b.q[j] = b.q[j], b.q[i] })
}
