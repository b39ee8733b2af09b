package keytab

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

type state struct{ key string }

func newTable() Table[state] { return New(func(s *state) string { return s.key }) }

// TestAgainstMap runs random puts, gets and deletes against a Go map, with
// few enough distinct keys that probe runs collide and wrap, and checks
// every key after each step while the table is small.
func TestAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tab := newTable()
	ref := map[string]*state{}
	for step := range 20000 {
		k := fmt.Sprintf("k%d", rng.IntN(300))
		switch rng.IntN(3) {
		case 0, 1:
			if ref[k] == nil {
				s := &state{key: k}
				ref[k] = s
				tab.Put(s)
			}
		case 2:
			delete(ref, k)
			tab.Delete(k)
		}
		if tab.Len() != len(ref) {
			t.Fatalf("step %d: Len = %d, want %d", step, tab.Len(), len(ref))
		}
		if step%97 == 0 || len(ref) < 20 {
			for i := range 300 {
				k := fmt.Sprintf("k%d", i)
				if got := tab.Get(k); got != ref[k] {
					t.Fatalf("step %d: Get(%s) = %p, want %p", step, k, got, ref[k])
				}
			}
		}
	}
	if got, want := tab.Keys(), slices.Sorted(maps.Keys(ref)); !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
}

// TestGrowAndShrink: the table grows past 7/8 full and shrinks once most
// keys are gone, keeping every key it holds reachable.
func TestGrowAndShrink(t *testing.T) {
	tab := newTable()
	const n = 10000
	for i := range n {
		tab.Put(&state{key: fmt.Sprint(i)})
	}
	if len(tab.slots) != 16384 {
		t.Fatalf("%d keys in %d slots, want 16384", n, len(tab.slots))
	}
	for i := range n - 10 {
		tab.Delete(fmt.Sprint(i))
	}
	if len(tab.slots) > 128 {
		t.Fatalf("10 keys left in %d slots, want it shrunk", len(tab.slots))
	}
	for i := n - 10; i < n; i++ {
		if tab.Get(fmt.Sprint(i)) == nil {
			t.Fatalf("key %d lost", i)
		}
	}
	if tab.Get("0") != nil || tab.Len() != 10 {
		t.Fatalf("Len = %d, want 10", tab.Len())
	}
	tab.Delete("absent")
	if tab.Len() != 10 {
		t.Fatal("deleting an absent key changed the table")
	}
}

func TestEmpty(t *testing.T) {
	tab := newTable()
	if tab.Get("x") != nil || tab.Len() != 0 || len(tab.Keys()) != 0 {
		t.Fatal("the empty table is not empty")
	}
	tab.Delete("x")
}

// BenchmarkGet is the lookup on the lock fast path, beside a Go map's.
func BenchmarkGet(b *testing.B) {
	keys := make([]string, 100000)
	tab := newTable()
	ref := map[string]*state{}
	for i := range keys {
		keys[i] = fmt.Sprintf("idle-%08d", i)
		s := &state{key: keys[i]}
		tab.Put(s)
		ref[keys[i]] = s
	}
	b.Run("keytab", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if tab.Get(keys[i%len(keys)]) == nil {
				b.Fatal("missing")
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if ref[keys[i%len(keys)]] == nil {
				b.Fatal("missing")
			}
		}
	})
}
