package intern

// ID names a value in its Table; the zero ID names none.
type ID uint32

type slot[V any] struct {
	v    V
	refs int
	// unused: the slot is in Table.unused (it may have been referenced
	// again since).
	unused bool
}

// Table is a set of interned values; the zero Table is empty and ready.
type Table[V comparable] struct {
	// vals are by ID-1, nil where free: pointers, so that what Get returns
	// stays put while the table grows.
	vals []*slot[V]
	free []ID
	ids  map[V]ID
	// unused are the values whose references all went, forgotten only when
	// a new value comes: a key that is granted, released and granted again
	// in one epoch would otherwise make and forget its value every time.
	unused []ID
	// last is the ID Ref last returned: the delegations granted in a row
	// mostly share one value, and comparing is cheaper than hashing.
	last ID
}

// Ref returns the ID of v and counts one more reference to it.
func (t *Table[V]) Ref(v V) ID {
	if id := t.last; id != 0 && t.vals[id-1] != nil && t.vals[id-1].v == v {
		t.vals[id-1].refs++
		return id
	}
	id, ok := t.ids[v]
	if !ok {
		if t.ids == nil {
			t.ids = make(map[V]ID)
		}
		t.forgetUnused()
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
	t.last = id
	return id
}

// Unref drops one reference to id (a no-op for the zero ID); once the last
// one goes, the value is forgotten when the next new value is made.
func (t *Table[V]) Unref(id ID) {
	if id == 0 {
		return
	}
	s := t.vals[id-1]
	if s.refs--; s.refs == 0 && !s.unused {
		s.unused = true
		t.unused = append(t.unused, id)
	}
}

// forgetUnused forgets the values no longer referenced (their IDs are then
// reused). Each value joins unused once per time it falls out of use, so the
// work is paid for by the Unref that put it there.
func (t *Table[V]) forgetUnused() {
	for _, id := range t.unused {
		s := t.vals[id-1]
		s.unused = false
		if s.refs == 0 {
			delete(t.ids, s.v)
			t.vals[id-1] = nil
			t.free = append(t.free, id)
		}
	}
	t.unused = t.unused[:0]
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

// Len is the number of values kept: those referenced, and those not yet
// forgotten.
func (t *Table[V]) Len() int { return len(t.ids) }
