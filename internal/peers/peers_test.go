package peers

import (
	"testing"

	"github.com/homelock/homelock/msg"
)

// TestShareAndForget: one Peer per (member, incarnation), shared while any
// reference holds it, forgotten with the last.
func TestShareAndForget(t *testing.T) {
	var tab Table
	n1 := msg.Member{ID: "n1", Store: 7, Addr: "a1", Version: 1}
	a, b := tab.Ref(n1, 1), tab.Ref(n1, 1)
	if a != b {
		t.Fatal("the same pair was interned twice")
	}
	c := tab.Ref(n1, 2)
	if c == a || c.Inc != 2 || c.ID != "n1" {
		t.Fatalf("another incarnation gave %+v", c)
	}
	if tab.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tab.Len())
	}
	tab.Unref(a)
	if tab.Ref(n1, 1) != b {
		t.Fatal("a peer still referenced was forgotten")
	}
	tab.Unref(b)
	tab.Unref(b)
	tab.Unref(c)
	tab.Unref(nil)
	if tab.Len() != 0 {
		t.Fatalf("Len = %d after the last references went, want 0", tab.Len())
	}
}
