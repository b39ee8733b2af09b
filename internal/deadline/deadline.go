package deadline

// Heap holds one wake-up per element. The zero Heap is not usable: NewHeap
// tells it where each element keeps its position.
type Heap[T any] struct {
	items []item[T]
	// pos returns where x keeps its place: index+1 in items, 0 when x is not
	// scheduled.
	pos func(x *T) *uint32
}

type item[T any] struct {
	at Instant
	x  *T
}

// NewHeap returns an empty heap whose elements keep their position where
// pos says.
func NewHeap[T any](pos func(x *T) *uint32) Heap[T] { return Heap[T]{pos: pos} }

// Add makes x wake at at, or earlier if it already wakes earlier. A zero at
// schedules nothing.
func (h *Heap[T]) Add(x *T, at Instant) {
	if at.IsZero() {
		return
	}
	if p := *h.pos(x); p != 0 {
		if at.Before(h.items[p-1].at) {
			h.items[p-1].at = at
			h.fix(int(p - 1))
		}
		return
	}
	h.items = append(h.items, item[T]{at, x})
	n := len(h.items) - 1
	*h.pos(x) = uint32(n + 1)
	h.up(n)
}

// At is when x wakes; zero when it is not scheduled.
func (h *Heap[T]) At(x *T) Instant {
	if p := *h.pos(x); p != 0 {
		return h.items[p-1].at
	}
	return 0
}

// Remove unschedules x (a no-op if it is not scheduled). A machine removes a
// state it forgets, so that the heap does not keep it alive.
func (h *Heap[T]) Remove(x *T) {
	p := *h.pos(x)
	if p == 0 {
		return
	}
	i, n := int(p-1), len(h.items)-1
	if i != n {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	h.pop()
}

// Next is the earliest scheduled wake-up; zero when none.
func (h *Heap[T]) Next() Instant {
	if len(h.items) == 0 {
		return 0
	}
	return h.items[0].at
}

// PopDue removes and returns one element due at or before now.
func (h *Heap[T]) PopDue(now Instant) (*T, bool) {
	if len(h.items) == 0 || h.items[0].at.After(now) {
		return nil, false
	}
	n := len(h.items) - 1
	h.swap(0, n)
	h.down(0, n)
	return h.pop(), true
}

// Len is the number of elements scheduled.
func (h *Heap[T]) Len() int { return len(h.items) }

// pop takes the last item off and clears its position.
func (h *Heap[T]) pop() *T {
	n := len(h.items) - 1
	x := h.items[n].x
	h.items[n] = item[T]{}
	h.items = h.items[:n]
	*h.pos(x) = 0
	return x
}

// The sift operations are container/heap's, step for step: for one sequence
// of operations they give the same order among equal wake-ups, which a
// datadriven script can see.

func (h *Heap[T]) less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }

func (h *Heap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i].x) = uint32(i + 1)
	*h.pos(h.items[j].x) = uint32(j + 1)
}

func (h *Heap[T]) fix(i int) {
	if !h.down(i, len(h.items)) {
		h.up(i)
	}
}

func (h *Heap[T]) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *Heap[T]) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // = 2*i + 2  // right child
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
