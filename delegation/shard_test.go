package delegation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// TestShardsDecideAlike drives holders with 1, 3 and 16 shards through one
// random schedule of locks, unlocks, fast-path admissions, grants, recalls,
// renewals and ticks over many keys, and requires the same messages and
// events from every step: the shard count may change only the order in
// which one Tick serves keys due at one instant, never what is decided.
func TestShardsDecideAlike(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runs := [][]string{shardRun(t, seed, 1), shardRun(t, seed, 3), shardRun(t, seed, 16)}
			for _, r := range runs[1:] {
				if len(r) != len(runs[0]) {
					t.Fatalf("%d steps against %d", len(r), len(runs[0]))
				}
				for i := range r {
					if r[i] != runs[0][i] {
						t.Fatalf("step %d differs:\n 1 shard:  %s\n sharded:  %s", i, runs[0][i], r[i])
					}
				}
			}
		})
	}
}

// shardRun plays seed's schedule on a holder with shards shards and returns
// each step's output, sorted within the step. It checks that the events
// after an admission name the slot the admission did.
func shardRun(t *testing.T, seed uint64, shards int) []string {
	rng := rand.New(rand.NewPCG(seed, 0))
	self := msg.Member{ID: "n1", Store: 1, Addr: "n1", Version: 1}
	home := msg.Member{ID: "h", Store: 2, Addr: "h", Version: 1}
	m := New(Config{Self: self, Inc: 1, MaxDrift: 0.01, MinUseful: time.Millisecond,
		RetryInterval: 10 * time.Millisecond, Lease: 200 * time.Millisecond, Shards: shards})
	now := time.Unix(1000, 0)
	m.OnEpoch(now, msg.Epoch{Number: 1, Members: []msg.Member{home}})
	env := msg.Envelope{From: home, FromInc: 1}
	var (
		steps    []string
		acquires []msg.Acquire
		counter  uint64
		locker   uint64
		admitted = map[string][]uint64{}
		slots    = map[uint64]uint32{} // by locker
		// Request sequence numbers follow the order in which one Tick
		// serves keys, so outputs name a request by its key and how many
		// requests for the key came before it.
		reqs    = map[msg.RequestID]string{}
		perKey  = map[string]int{}
		reqName = func(key string, r msg.RequestID) string {
			if _, ok := reqs[r]; !ok {
				perKey[key]++
				reqs[r] = fmt.Sprintf("%s#%d", key, perKey[key])
			}
			return reqs[r]
		}
	)
	record := func(extra ...string) {
		out := m.Ready()
		var lines []string
		for _, e := range out.Msgs {
			switch b := e.Body.(type) {
			case msg.Acquire:
				acquires = append(acquires, b)
				lines = append(lines, fmt.Sprintf("Acquire %s %s %d %v %v", b.Key, reqName(b.Key, b.Req), b.Attempt, b.Lease, b.Queued))
			case msg.Withdraw:
				lines = append(lines, fmt.Sprintf("Withdraw %s %s", b.Key, reqName(b.Key, b.Req)))
			default:
				lines = append(lines, fmt.Sprintf("%s %T%+v", e.To, e.Body, e.Body))
			}
		}
		for _, e := range out.Events {
			switch e.Kind {
			case Admitted:
				slots[e.Locker] = e.Slot
			case Extended, Revoked:
				if slots[e.Locker] != e.Slot {
					t.Errorf("%d shards: %v for %s locker %d names slot %d, admitted at %d", shards, e.Kind, e.Key, e.Locker, e.Slot, slots[e.Locker])
				}
			}
			e.Slot = 0 // a place within the shard
			lines = append(lines, fmt.Sprintf("%+v", e))
			if e.Kind == Admitted {
				admitted[e.Key] = append(admitted[e.Key], e.Locker)
			}
		}
		// The schedule picks from acquires by index: keep it in an order
		// that does not depend on the order within a step.
		slices.SortFunc(acquires, func(a, b msg.Acquire) int {
			return strings.Compare(fmt.Sprintf("%s %d", reqs[a.Req], a.Attempt), fmt.Sprintf("%s %d", reqs[b.Req], b.Attempt))
		})
		slices.Sort(lines)
		steps = append(steps, fmt.Sprint(append(extra, lines...)))
	}
	for range 400 {
		key := fmt.Sprintf("k%d", rng.IntN(24))
		switch op := rng.IntN(10); {
		case op < 3:
			locker++
			// Some sections have a lease of their own, which Tick ends.
			lease := time.Duration(rng.IntN(3)) * 40 * time.Millisecond
			if ev, ok := m.TryAdmit(now, key, locker, lease); ok {
				admitted[key] = append(admitted[key], locker)
				slots[locker] = ev.Slot
				ev.Slot = 0
				record("fast", fmt.Sprintf("%+v", ev))
				continue
			}
			m.Lock(now, key, locker, now.Add(time.Duration(rng.IntN(300))*time.Millisecond), lease, 0)
		case op < 5:
			if l := admitted[key]; len(l) > 0 {
				m.Unlock(now, key, l[0])
				admitted[key] = l[1:]
			}
		case op < 7 && len(acquires) > 0:
			i := rng.IntN(len(acquires))
			a := acquires[i]
			acquires = slices.Delete(acquires, i, i+1)
			counter++
			m.Grant(now, env, msg.Grant{Key: a.Key, Req: a.Req, Attempt: a.Attempt, Lease: a.Lease,
				Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: counter}, Contended: rng.IntN(4) == 0})
		case op < 8:
			if tok, _, _, ok := m.Holding(key); ok {
				m.Recall(now, env, msg.Recall{Key: key, Token: tok})
			}
		case op < 9:
			if tok, _, _, ok := m.Holding(key); ok {
				m.RenewReply(now, msg.Envelope{}, msg.RenewReply{Key: key, Token: tok, Attempt: uint32(rng.IntN(3)), OK: rng.IntN(5) > 0, Lease: 200 * time.Millisecond})
			}
		default:
			// Steps of whole milliseconds make keys fall due together.
			now = now.Add(time.Duration(1+rng.IntN(40)) * time.Millisecond)
			m.Tick(now)
		}
		record()
		for _, key := range m.HeldKeys() {
			if tok, _, _, _ := m.Holding(key); tok.Counter == 0 {
				panic("held without a token")
			}
		}
	}
	st := m.Stats()
	steps = append(steps, fmt.Sprintf("stats %+v", st), fmt.Sprint(m.NextDeadline()), fmt.Sprint(m.HeldKeys()))
	return steps
}

// TestShardOfIsTheHashModuloTheCount pins the key-to-shard map: xxhash
// modulo the count, whatever the count, since a seeded simulation replays
// only if every run maps keys alike (a power of two takes a mask instead of
// the division, and must land on the same shard).
func TestShardOfIsTheHashModuloTheCount(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7, 16, 17, 64, 1000, 1024} {
		for i := range 2000 {
			key := fmt.Sprintf("key-%d", i)
			want := 0
			if n > 1 {
				want = int(xxhash.Sum64String(key) % uint64(n))
			}
			if got := ShardOf(key, n); got != want {
				t.Fatalf("ShardOf(%q, %d) = %d, want %d", key, n, got, want)
			}
		}
	}
}
