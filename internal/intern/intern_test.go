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
	if tab.Len() != 1 {
		t.Fatalf("last reference dropped: Len %d, want 1", tab.Len())
	}
	// The freed ID is reused, and names the new value.
	d := tab.Ref([2]uint64{5, 6})
	if d != a || *tab.Get(d) != [2]uint64{5, 6} {
		t.Fatalf("reuse: id %d (freed %d) names %v", d, a, *tab.Get(d))
	}
	tab.Unref(0) // no-op
}

func TestSwapKeepsSoleReference(t *testing.T) {
	var tab Table[int]
	a := tab.Ref(7)
	p := tab.Get(a)
	if b := tab.Swap(a, 7); b != a || tab.Get(b) != p {
		t.Fatalf("Swap to the same value made a new one: %d -> %d", a, b)
	}
	c := tab.Swap(a, 8)
	if tab.Len() != 1 || *tab.Get(c) != 8 {
		t.Fatalf("after Swap to 8: Len %d, value %d", tab.Len(), *tab.Get(c))
	}
	if tab.Swap(c, 0) == 0 || tab.Len() != 1 {
		t.Fatal("Swap to the zero value still interns it")
	}
}
