package homelock

import (
	"sync"
	"sync/atomic"

	"github.com/homelock/homelock/msg"
)

// inbox holds received envelopes, in the order received, until a step
// takes them. Two arrays take turns, so that receiving allocates nothing
// once they have grown.
type inbox struct {
	mu    sync.Mutex
	q     []msg.Envelope
	spare []msg.Envelope
	// n is len(q), read without mu to see whether anything waits.
	n atomic.Int32
	// full counts envelopes that found inboxCap waiting, whose handler
	// then waited for the locks (Stats.InboxFull).
	full atomic.Uint64
}

// push appends env and returns how many envelopes now wait.
func (b *inbox) push(env msg.Envelope) int {
	b.mu.Lock()
	b.q = append(b.q, env)
	k := len(b.q)
	b.n.Store(int32(k))
	b.mu.Unlock()
	return k
}

func (b *inbox) waiting() bool { return b.len() > 0 }

// len is how many envelopes wait now.
func (b *inbox) len() int { return int(b.n.Load()) }

// take returns every waiting envelope, oldest first; the caller hands the
// slice back with giveBack once it has stepped them.
func (b *inbox) take() []msg.Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := b.q
	b.q, b.spare = b.spare[:0], nil
	b.n.Store(0)
	return batch
}

// giveBack returns a batch's array for reuse, its envelopes cleared.
func (b *inbox) giveBack(batch []msg.Envelope) {
	clear(batch)
	b.mu.Lock()
	if b.spare == nil && cap(batch) <= inboxCap {
		b.spare = batch[:0]
	}
	b.mu.Unlock()
}
