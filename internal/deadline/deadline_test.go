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

// TestOneEntryPerKey: adding a key again only moves it earlier; the heap
// never holds more entries than keys, however often a key is rescheduled.
func TestOneEntryPerKey(t *testing.T) {
	var d Heap
	base := time.Unix(0, 0)
	for i := 0; i < 1000; i++ {
		d.Add(base.Add(time.Duration(1000-i)*time.Millisecond), "hot")
		d.Add(base.Add(time.Duration(i)*time.Second), "cold")
	}
	if d.Len() != 2 {
		t.Fatalf("Len = %d after rescheduling two keys, want 2", d.Len())
	}
	if got := d.Next(); !got.Equal(base) {
		t.Fatalf("Next = %v, want the earliest (cold at 0s)", got)
	}
	d.Add(base.Add(time.Hour), "hot") // later: ignored
	k1, _ := d.PopDue(base.Add(time.Second))
	k2, _ := d.PopDue(base.Add(time.Second))
	if k1 != "cold" || k2 != "hot" {
		t.Fatalf("popped %q then %q, want cold then hot (hot kept its earliest, 1ms)", k1, k2)
	}
	if d.Len() != 0 {
		t.Fatalf("Len = %d after popping both, want 0", d.Len())
	}
}
