package peers

import (
	"testing"

	"github.com/homelock/homelock/msg"
)

// TestShareAndForget: one Peer per (member, incarnation), shared while any
// reference holds it, forgotten with the last, its ID then reused.
func TestShareAndForget(t *testing.T) {
	var tab Table
	n1 := msg.Member{ID: "n1", Store: 7, Addr: "a1", Version: 1}
	a, b := tab.Ref(n1, 1), tab.Ref(n1, 1)
	if a != b || a == 0 {
		t.Fatalf("the same pair was interned as %d and %d", a, b)
	}
	c := tab.Ref(n1, 2)
	if p := tab.Get(c); c == a || p.Inc != 2 || p.ID != "n1" {
		t.Fatalf("another incarnation gave %d: %+v", c, p)
	}
	if tab.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tab.Len())
	}
	tab.Unref(a)
	if tab.Ref(n1, 1) != b || tab.Get(b).Inc != 1 {
		t.Fatal("a peer still referenced was forgotten")
	}
	tab.Unref(b)
	tab.Unref(b)
	tab.Unref(0)
	if tab.Len() != 1 || tab.Get(0) != nil {
		t.Fatalf("Len = %d after the first pair's references went, want 1", tab.Len())
	}
	n2 := msg.Member{ID: "n2", Store: 8}
	if d := tab.Ref(n2, 1); d != a || tab.Get(d).ID != "n2" {
		t.Fatalf("a new peer got ID %d, want the freed %d reused", d, a)
	}
	tab.Unref(c)
	if tab.Len() != 1 {
		t.Fatalf("Len = %d, want 1", tab.Len())
	}
}
