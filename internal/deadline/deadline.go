// Package deadline is a min-heap of per-key wake-ups for the pure state
// machines: they keep their timers as data and the driver asks for the next
// deadline, so virtual and real time drive the same code.
//
// A key has at most one entry: adding a key again moves its wake-up earlier
// or does nothing. (An earlier version kept every wake-up and let stale ones
// fire spuriously; under a hot key's churn they piled up by the hundred
// thousand and a Tick never ended.) The machines still re-check a key when
// it wakes, so a wake-up that comes early is harmless.
package deadline

import (
	"container/heap"
	"time"
)

// Heap holds one wake-up per key.
type Heap struct{ h wakeHeap }

type wake struct {
	at  time.Time
	key string
}

type wakeHeap struct {
	items []wake
	idx   map[string]int
}

func (h *wakeHeap) Len() int           { return len(h.items) }
func (h *wakeHeap) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *wakeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.idx[h.items[i].key] = i
	h.idx[h.items[j].key] = j
}
func (h *wakeHeap) Push(x any) {
	w := x.(wake)
	h.idx[w.key] = len(h.items)
	h.items = append(h.items, w)
}
func (h *wakeHeap) Pop() any {
	n := len(h.items) - 1
	w := h.items[n]
	h.items[n] = wake{}
	h.items = h.items[:n]
	delete(h.idx, w.key)
	return w
}

// Add makes key wake at at, or earlier if it already wakes earlier.
func (d *Heap) Add(at time.Time, key string) {
	if d.h.idx == nil {
		d.h.idx = make(map[string]int)
	}
	if i, ok := d.h.idx[key]; ok {
		if at.Before(d.h.items[i].at) {
			d.h.items[i].at = at
			heap.Fix(&d.h, i)
		}
		return
	}
	heap.Push(&d.h, wake{at, key})
}

// Next is the earliest scheduled wake-up; zero when none.
func (d *Heap) Next() time.Time {
	if len(d.h.items) == 0 {
		return time.Time{}
	}
	return d.h.items[0].at
}

// PopDue removes and returns one key due at or before now.
func (d *Heap) PopDue(now time.Time) (string, bool) {
	if len(d.h.items) == 0 || d.h.items[0].at.After(now) {
		return "", false
	}
	return heap.Pop(&d.h).(wake).key, true
}

// Len is the number of keys scheduled.
func (d *Heap) Len() int { return len(d.h.items) }
