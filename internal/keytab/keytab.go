package keytab

import (
	"hash/maphash"
	"iter"
	"slices"
)

// Table holds states of type T, each with a distinct key. The zero Table is
// not usable: New tells it where a state keeps its key.
type Table[T any] struct {
	slots []*T
	// tags[i] is 0 for an empty slot, else tagBit | seven bits of the hash
	// of slots[i]'s key.
	tags []uint8
	n    int
	key  func(*T) string
	seed maphash.Seed
	// last is the state Get last found: a lock and its unlock, and the
	// repeat locks of one key, look the same key up in a row.
	last *T
}

const (
	tagBit  = 0x80
	minSize = 8
)

// New returns an empty table whose states keep their key where key says; a
// state's key must not change while it is in the table.
func New[T any](key func(*T) string) Table[T] {
	return Table[T]{key: key, seed: maphash.MakeSeed()}
}

func (t *Table[T]) hash(k string) uint64 { return maphash.String(t.seed, k) }

// tag is the hash's top seven bits, marked occupied; the slot index comes
// from the low bits.
func tag(h uint64) uint8 { return uint8(h>>57) | tagBit }

// find returns the slot holding k, or the empty slot where the probe for k
// ended, and whether k was found.
func (t *Table[T]) find(k string, h uint64) (int, bool) {
	mask := len(t.slots) - 1
	want := tag(h)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return i, false
		case want:
			if t.key(t.slots[i]) == k {
				return i, true
			}
		}
	}
}

// Get returns the state for key k, nil if there is none.
func (t *Table[T]) Get(k string) *T {
	if t.last != nil && t.key(t.last) == k {
		return t.last
	}
	if t.n == 0 {
		return nil
	}
	if i, ok := t.find(k, t.hash(k)); ok {
		t.last = t.slots[i]
		return t.last
	}
	return nil
}

// Put adds v, replacing the state with the same key if there is one.
func (t *Table[T]) Put(v *T) {
	if (t.n+1)*8 > len(t.slots)*7 {
		t.resize(max(2*len(t.slots), minSize))
	}
	h := t.hash(t.key(v))
	i, ok := t.find(t.key(v), h)
	if !ok {
		t.n++
		t.tags[i] = tag(h)
	} else if t.slots[i] == t.last {
		t.last = nil
	}
	t.slots[i] = v
}

// Delete removes the state for key k, if any.
func (t *Table[T]) Delete(k string) {
	if t.n == 0 {
		return
	}
	i, ok := t.find(k, t.hash(k))
	if !ok {
		return
	}
	if t.slots[i] == t.last {
		t.last = nil
	}
	// Backward shift: move later members of the probe run into the hole
	// unless their own probe starts after it, so that no probe meets an
	// empty slot before the key it looks for (no tombstones).
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.tags[j] != 0; j = (j + 1) & mask {
		home := int(t.hash(t.key(t.slots[j]))) & mask
		if (j-home)&mask < (j-i)&mask {
			continue // its probe starts after the hole: it stays reachable
		}
		t.slots[i], t.tags[i] = t.slots[j], t.tags[j]
		i = j
	}
	t.slots[i], t.tags[i] = nil, 0
	t.n--
	if len(t.slots) > minSize && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// resize rehashes every state into size slots (a power of two).
func (t *Table[T]) resize(size int) {
	old := t.slots
	t.slots, t.tags = make([]*T, size), make([]uint8, size)
	mask := size - 1
	for _, v := range old {
		if v == nil {
			continue
		}
		h := t.hash(t.key(v))
		i := int(h) & mask
		for t.tags[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i], t.tags[i] = v, tag(h)
	}
}

// Len is the number of states.
func (t *Table[T]) Len() int { return t.n }

// All yields every state, in no defined order; the table must not change
// meanwhile.
func (t *Table[T]) All() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for _, v := range t.slots {
			if v != nil && !yield(v) {
				return
			}
		}
	}
}

// Keys returns every key, sorted.
func (t *Table[T]) Keys() []string {
	keys := make([]string, 0, t.n)
	for v := range t.All() {
		keys = append(keys, t.key(v))
	}
	slices.Sort(keys)
	return keys
}
