// Package deadline is a min-heap of per-key wake-ups for the pure state
// machines: they keep their timers as data and the driver asks for the next
// deadline, so virtual and real time drive the same code.
//
// Entries are never removed early. When a key's wake-up moves, the old entry
// stays and fires as a spurious wake-up; the machine re-checks the key, which
// is cheaper and simpler than keeping heap indexes.
package deadline

import (
	"container/heap"
	"time"
)

// Heap holds wake-ups by key.
type Heap struct{ h wakeHeap }

type wake struct {
	at  time.Time
	key string
}

type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// Add schedules key at at.
func (d *Heap) Add(at time.Time, key string) { heap.Push(&d.h, wake{at, key}) }

// Next is the earliest scheduled wake-up; zero when none.
func (d *Heap) Next() time.Time {
	if len(d.h) == 0 {
		return time.Time{}
	}
	return d.h[0].at
}

// PopDue removes and returns one key due at or before now.
func (d *Heap) PopDue(now time.Time) (string, bool) {
	if len(d.h) == 0 || d.h[0].at.After(now) {
		return "", false
	}
	return heap.Pop(&d.h).(wake).key, true
}

// Len is the number of entries, spurious ones included.
func (d *Heap) Len() int { return len(d.h) }
