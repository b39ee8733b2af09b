package deadline

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type elem struct {
	name string
	pos  uint32
}

func newHeap() Heap[elem] { return NewHeap(func(e *elem) *uint32 { return &e.pos }) }

func TestPopDueOrder(t *testing.T) {
	d := newHeap()
	base := At(time.Unix(0, 0))
	a, b, c := &elem{name: "a"}, &elem{name: "b"}, &elem{name: "c"}
	d.Add(c, base.Add(3*time.Second))
	d.Add(a, base.Add(1*time.Second))
	d.Add(b, base.Add(2*time.Second))
	if got := d.Next(); got != base.Add(time.Second) {
		t.Fatalf("Next = %v, want 1s", got.Sub(base))
	}
	if _, ok := d.PopDue(base); ok {
		t.Fatal("nothing is due at 0s")
	}
	var order []string
	for {
		e, ok := d.PopDue(base.Add(2 * time.Second))
		if !ok {
			break
		}
		if d.At(e) != 0 {
			t.Errorf("%s still has a wake-up after it was popped", e.name)
		}
		order = append(order, e.name)
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
	d := newHeap()
	base := At(time.Unix(0, 0))
	hot, cold := &elem{name: "hot"}, &elem{name: "cold"}
	for i := 0; i < 1000; i++ {
		d.Add(hot, base.Add(time.Duration(1000-i)*time.Millisecond))
		d.Add(cold, base.Add(time.Duration(i)*time.Second))
	}
	if d.Len() != 2 {
		t.Fatalf("Len = %d after rescheduling two keys, want 2", d.Len())
	}
	if got := d.Next(); got != base {
		t.Fatalf("Next = %v, want the earliest (cold at 0s)", got.Sub(base))
	}
	d.Add(hot, base.Add(time.Hour)) // later: ignored
	k1, _ := d.PopDue(base.Add(time.Second))
	k2, _ := d.PopDue(base.Add(time.Second))
	if k1 != cold || k2 != hot {
		t.Fatalf("popped %q then %q, want cold then hot (hot kept its earliest, 1ms)", k1.name, k2.name)
	}
	if d.Len() != 0 {
		t.Fatalf("Len = %d after popping both, want 0", d.Len())
	}
}

// TestRemoveKeepsOrder: removing arbitrary elements leaves the others
// popping in wake-up order, each found where its position says.
func TestRemoveKeepsOrder(t *testing.T) {
	d := newHeap()
	rng := rand.New(rand.NewPCG(1, 2))
	base := At(time.Unix(1000, 0))
	es := make([]*elem, 500)
	for i := range es {
		es[i] = &elem{}
		d.Add(es[i], base.Add(time.Duration(rng.IntN(100))*time.Millisecond))
	}
	var want []Instant
	for i, e := range es {
		if i%3 == 0 {
			d.Remove(e)
			d.Remove(e) // a second Remove is a no-op
			continue
		}
		want = append(want, d.At(e))
	}
	slices.Sort(want)
	for i, w := range want {
		e, ok := d.PopDue(base.Add(time.Hour))
		if !ok || d.At(e) != 0 {
			t.Fatalf("pop %d: ok=%v", i, ok)
		}
		if got := d.items; len(got) > 0 && got[0].at.Before(w) {
			t.Fatalf("pop %d: an item at %v was left before %v", i, got[0].at.Sub(base), w.Sub(base))
		}
	}
	if d.Len() != 0 {
		t.Fatalf("Len = %d after popping everything, want 0", d.Len())
	}
}

// TestInstant: conversions keep order and arithmetic exact inside the
// range, the zero values correspond, and the ends saturate.
func TestInstant(t *testing.T) {
	if At(time.Time{}) != 0 || !Instant(0).Time().IsZero() {
		t.Fatal("the zero values do not correspond")
	}
	for _, tm := range []time.Time{time.Unix(0, 0), time.Unix(0, -1), time.Unix(1_000_000, 5), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		i := At(tm)
		if i.IsZero() || !i.Time().Equal(tm) {
			t.Errorf("%v round-trips to %v (zero %v)", tm, i.Time(), i.IsZero())
		}
		if got := i.Add(time.Second).Sub(i); got != time.Second {
			t.Errorf("%v: Add(1s).Sub = %v", tm, got)
		}
		if !At(tm.Add(-1)).Before(i) || !At(tm.Add(1)).After(i) {
			t.Errorf("%v: order not kept", tm)
		}
		if FromUnixNano(tm.UnixNano()) != i || i.UnixNano() != tm.UnixNano() {
			t.Errorf("%v: FromUnixNano/UnixNano disagree with At: %d, %d", tm, FromUnixNano(tm.UnixNano()), i.UnixNano())
		}
	}
	far := At(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	if far != maxInstant || At(time.Unix(1, 0)).Add(math.MaxInt64).Add(math.MaxInt64) != maxInstant {
		t.Error("the far future does not saturate")
	}
	if At(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)) != minInstant || minInstant.Add(-time.Hour) != minInstant {
		t.Error("the far past does not saturate at the least non-zero Instant")
	}
	if d := minInstant.Sub(maxInstant); d != math.MinInt64 {
		t.Errorf("min − max = %v, want the least Duration", d)
	}
}
