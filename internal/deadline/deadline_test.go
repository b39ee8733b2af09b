package deadline

import (
	"testing"
	"time"
)

func TestPopDueOrder(t *testing.T) {
	var d Heap
	base := time.Unix(0, 0)
	d.Add(base.Add(3*time.Second), "c")
	d.Add(base.Add(1*time.Second), "a")
	d.Add(base.Add(2*time.Second), "b")
	if got := d.Next(); !got.Equal(base.Add(time.Second)) {
		t.Fatalf("Next = %v, want 1s", got)
	}
	if _, ok := d.PopDue(base); ok {
		t.Fatal("nothing is due at 0s")
	}
	var order []string
	for {
		k, ok := d.PopDue(base.Add(2 * time.Second))
		if !ok {
			break
		}
		order = append(order, k)
	}
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("due at 2s popped %v, want [a b]", order)
	}
	if d.Len() != 1 {
		t.Fatalf("Len = %d, want 1", d.Len())
	}
}
