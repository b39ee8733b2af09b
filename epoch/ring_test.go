package epoch

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	rendezvous "github.com/dgryski/go-rendezvous"

	"github.com/homelock/homelock/msg"
)

func ringEpoch(n int) msg.Epoch {
	e := msg.Epoch{Number: 7, Caps: msg.Caps{Ring: msg.RingV1}}
	for i := range n {
		e.Members = append(e.Members, msg.Member{ID: msg.NodeID(fmt.Sprintf("node-%02d", i)), Store: uint64(i + 1), Version: 1})
	}
	msg.SortMembers(e.Members)
	return e
}

func TestRingHome(t *testing.T) {
	e := ringEpoch(5)
	r := NewRing(e)
	equal(t, e.Number, r.Epoch().Number)
	counts := map[msg.NodeID]int{}
	for i := range 10000 {
		k := fmt.Sprintf("key-%d", i)
		h, ok := r.Home(k)
		must(t, ok)
		h2, _ := NewRing(e).Home(k)
		equal(t, h, h2, "deterministic")
		counts[h.ID]++
	}
	for id, n := range counts {
		must(t, n > 1500 && n < 2500, "%s homes %d of 10000 keys", id, n)
	}
	// Members advertising no version are no key's home.
	e0 := e.Clone()
	for i := range e0.Members {
		if i != 2 {
			e0.Members[i].Version = 0
		}
	}
	for i := range 100 {
		h, ok := NewRing(e0).Home(fmt.Sprint(i))
		must(t, ok)
		equal(t, e0.Members[2].ID, h.ID)
	}
	_, ok := NewRing(msg.Epoch{}).Home("k")
	mustNot(t, ok, "an empty ring has no home")
	_, ok = (*Ring)(nil).Home("k")
	mustNot(t, ok)
}

func TestRingMoved(t *testing.T) {
	e := ringEpoch(5)
	old := NewRing(e)
	less := e.Clone()
	gone := less.Members[1]
	less.Members = append(less.Members[:1], less.Members[2:]...)
	nr := NewRing(less)
	moved := 0
	for i := range 5000 {
		k := fmt.Sprintf("k%d", i)
		h, _ := old.Home(k)
		m := Moved(old, nr, k)
		equal(t, h.Same(gone), m, "only the removed member's keys move")
		if m {
			moved++
		}
		mustNot(t, Moved(old, old, k))
	}
	must(t, moved > 600 && moved < 1400, "moved %d of 5000", moved)
	// A new store under the same node ID is a new home (H17).
	re := e.Clone()
	re.Members[1].Store = 99
	for i := range 200 {
		k := fmt.Sprintf("k%d", i)
		h, _ := old.Home(k)
		equal(t, h.ID == gone.ID, Moved(old, NewRing(re), k))
	}
	must(t, Moved(nil, old, "k"))
}

func TestRingHomeAllocFree(t *testing.T) {
	r := NewRing(ringEpoch(7))
	allocs := testing.AllocsPerRun(1000, func() { r.Home("some/key/42") })
	equal(t, 0.0, allocs)
}

func BenchmarkRingHome(b *testing.B) {
	for _, n := range []int{3, 7, 31} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			r := NewRing(ringEpoch(n))
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprintf("table/%d/row/%d", i%17, i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Home(keys[i&1023])
				i++
			}
		})
	}
}

// BenchmarkRenewalRound: one renewal round of a 5-member epoch, from the Tick
// that starts it to the answers that grant liveness (the answers are
// prepared once; each iteration reuses them with the new nonce).
func BenchmarkRenewalRound(b *testing.B) {
	c, _ := startedCluster("a", "b", "c", "d", "e")
	a := c.nodes["a"]
	l, _, _ := a.Current()
	var answers []msg.Envelope
	for _, id := range []string{"b", "c", "d", "e"} {
		answers = append(answers, c.nodes[msg.NodeID(id)].envelopeTo("a", msg.RenewalAnswer{Result: msg.RenewalOK}))
	}
	_ = l
	now := c.now
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(simCfg.EpochLease / 3)
		a.Tick(now)
		nonce := a.live.r.nonce
		for _, env := range answers {
			env.Body = msg.RenewalAnswer{Nonce: nonce, Result: msg.RenewalOK}
			a.Step(now, env)
		}
		if a.LiveUntil().Before(now) {
			b.Fatal("no liveness")
		}
	}
}

// TestRingIsRendezvous: RingV1 is go-rendezvous over the eligible members'
// node IDs with xxhash64, and a member listed twice under one node ID homes
// its keys as the last entry with that ID. A ring that mapped one key
// elsewhere would move keys between versions of homelock.
func TestRingIsRendezvous(t *testing.T) {
	dup := ringEpoch(4)
	dup.Members = append(dup.Members, msg.Member{ID: dup.Members[1].ID, Store: 99, Version: 1})
	unversioned := ringEpoch(7)
	unversioned.Members[3].Version = 0
	for _, e := range []msg.Epoch{ringEpoch(1), ringEpoch(3), ringEpoch(9), ringEpoch(40), dup, unversioned} {
		byID := map[string]msg.Member{}
		var ids []string
		for _, mb := range e.Members {
			if mb.Version != 0 {
				ids = append(ids, string(mb.ID))
				byID[string(mb.ID)] = mb
			}
		}
		want := rendezvous.New(ids, xxhash.Sum64String)
		r := NewRing(e)
		for i := range 5000 {
			k := fmt.Sprintf("key-%d", i)
			got, ok := r.Home(k)
			must(t, ok)
			equal(t, byID[want.Lookup(k)], got, "home of %s among %d members", k, len(e.Members))
		}
	}
}
