package intern

import "testing"

func TestRefUnref(t *testing.T) {
	var tab Table[[2]uint64]
	a := tab.Ref([2]uint64{1, 2})
	b := tab.Ref([2]uint64{1, 2})
	c := tab.Ref([2]uint64{3, 4})
	if a != b || a == c || a == 0 || c == 0 {
		t.Fatalf("ids %d %d %d: want a == b, distinct from c, none zero", a, b, c)
	}
	if got := *tab.Get(c); got != [2]uint64{3, 4} {
		t.Fatalf("Get(c) = %v", got)
	}
	if tab.Get(0) != nil {
		t.Fatal("Get(0) names a value")
	}
	tab.Unref(a)
	if tab.Len() != 2 {
		t.Fatalf("one of two references dropped: Len %d, want 2", tab.Len())
	}
	tab.Unref(b)
	// Kept until a new value comes: referenced again, it is the same.
	if again := tab.Ref([2]uint64{1, 2}); again != a || tab.Len() != 2 {
		t.Fatalf("referenced again: id %d (was %d), Len %d", again, a, tab.Len())
	}
	tab.Unref(a)
	// A new value forgets it; its ID is reused, and names the new value.
	d := tab.Ref([2]uint64{5, 6})
	if d != a || *tab.Get(d) != [2]uint64{5, 6} || tab.Len() != 2 {
		t.Fatalf("reuse: id %d (freed %d) names %v, Len %d", d, a, *tab.Get(d), tab.Len())
	}
	tab.Unref(0) // no-op
}

// TestUnusedForgotten: values that fall out of use do not pile up, however
// often they do.
func TestUnusedForgotten(t *testing.T) {
	var tab Table[int]
	for i := range 1000 {
		id := tab.Ref(i)
		for range 3 {
			tab.Unref(id)
			id = tab.Ref(i)
		}
		tab.Unref(id)
	}
	if tab.Len() > 1 || len(tab.unused) > 1 || len(tab.vals) > 2 {
		t.Fatalf("after 1000 values in turn: Len %d, %d unused, %d slots", tab.Len(), len(tab.unused), len(tab.vals))
	}
}

// TestRepeatNoAlloc: a value granted, released and granted again allocates
// nothing (the home's hot key does this for every handoff).
func TestRepeatNoAlloc(t *testing.T) {
	var tab Table[[2]uint64]
	tab.Unref(tab.Ref([2]uint64{1, 1}))
	if n := testing.AllocsPerRun(100, func() { tab.Unref(tab.Ref([2]uint64{1, 1})) }); n != 0 {
		t.Fatalf("%v allocations per Ref and Unref", n)
	}
}

func TestSwapKeepsSoleReference(t *testing.T) {
	var tab Table[int]
	a := tab.Ref(7)
	p := tab.Get(a)
	if b := tab.Swap(a, 7); b != a || tab.Get(b) != p {
		t.Fatalf("Swap to the same value made a new one: %d -> %d", a, b)
	}
	c := tab.Swap(a, 8)
	if tab.Len() > 2 || *tab.Get(c) != 8 {
		t.Fatalf("after Swap to 8: Len %d, value %d", tab.Len(), *tab.Get(c))
	}
	if tab.Swap(c, 0) == 0 || tab.Len() > 2 {
		t.Fatal("Swap to the zero value still interns it")
	}
}
