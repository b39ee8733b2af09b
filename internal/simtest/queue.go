package simtest

// Queue is the simulators' event queue: a binary min-heap ordered by time,
// then by the order of Push, so that a seed replays event for event. The
// keys sit inline beside the value so that ordering never chases a pointer:
// the queue is a simulator's hottest structure.
type Queue[T any] struct {
	items []queued[T]
	seq   uint64
}

type queued[T any] struct {
	at  int64
	seq uint64
	v   T
}

func (a *queued[T]) before(b *queued[T]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// Len is the number of queued events.
func (q *Queue[T]) Len() int { return len(q.items) }

// Push queues v at time at (any unit, as long as it is one) and returns its
// sequence number: 1 for the first Push, then one more each time.
func (q *Queue[T]) Push(at int64, v T) uint64 {
	q.seq++
	h := append(q.items, queued[T]{at: at, seq: q.seq, v: v})
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	q.items = h
	return q.seq
}

// Pop removes and returns the earliest event. The queue must not be empty.
func (q *Queue[T]) Pop() (at int64, v T) {
	h := q.items
	at, v = h[0].at, h[0].v
	last := len(h) - 1
	h[0] = h[last]
	h[last] = queued[T]{} // the value may hold pointers: let them go
	h = h[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].before(&h[least]) {
			least = l
		}
		if r < len(h) && h[r].before(&h[least]) {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	q.items = h
	return at, v
}
