package intern

// ID names a value in its Table; the zero ID names none.
type ID uint32

type slot[V any] struct {
	v    V
	refs int
}

// Table is a set of interned values; the zero Table is empty and ready.
type Table[V comparable] struct {
	// vals are by ID-1, nil where free: pointers, so that what Get returns
	// stays put while the table grows.
	vals []*slot[V]
	free []ID
	ids  map[V]ID
}

// Ref returns the ID of v and counts one more reference to it.
func (t *Table[V]) Ref(v V) ID {
	id, ok := t.ids[v]
	if !ok {
		if t.ids == nil {
			t.ids = make(map[V]ID)
		}
		s := &slot[V]{v: v}
		if n := len(t.free); n > 0 {
			id = t.free[n-1]
			t.free = t.free[:n-1]
			t.vals[id-1] = s
		} else {
			t.vals = append(t.vals, s)
			id = ID(len(t.vals))
		}
		t.ids[v] = id
	}
	t.vals[id-1].refs++
	return id
}

// Unref drops one reference to id (a no-op for the zero ID); the last one
// forgets the value.
func (t *Table[V]) Unref(id ID) {
	if id == 0 {
		return
	}
	s := t.vals[id-1]
	if s.refs--; s.refs == 0 {
		delete(t.ids, s.v)
		t.vals[id-1] = nil
		t.free = append(t.free, id)
	}
}

// Swap references v instead of old (either may be zero for none) and returns
// v's ID: Ref before Unref, so that a value referenced only by old is not
// forgotten and made again.
func (t *Table[V]) Swap(old ID, v V) ID {
	id := t.Ref(v)
	t.Unref(old)
	return id
}

// Get returns the value id names, nil for the zero ID. Read it, never
// change it: every state that names it shares it.
func (t *Table[V]) Get(id ID) *V {
	if id == 0 {
		return nil
	}
	return &t.vals[id-1].v
}

// Len is the number of values referenced.
func (t *Table[V]) Len() int { return len(t.ids) }
