package homelock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/cacheline"
	"github.com/homelock/homelock/internal/deadline"
)

// TestRepeatPathAcrossShards runs the repeat path of keys in different
// shards on several goroutines of one node at once, while the other nodes
// contend for the same keys (recalls, drains, slow unlocks and handoffs
// under way beside the fast path), and checks on every critical section
// that no other is running on its key anywhere and that its token is above
// every earlier one's. CI runs it again under the race detector, which
// checks that the fast path touches nothing that a step writes under the
// other locks.
func TestRepeatPathAcrossShards(t *testing.T) {
	c := newCluster(t, 3, longLeases)
	c.waitAvailable()
	n := c.nodes[0]

	// Eight keys in eight different shards.
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(keys) < 8; i++ {
		k := fmt.Sprintf("shard-key-%d", i)
		if s := delegation.ShardOf(k, len(n.shards)); !seen[s] {
			seen[s] = true
			keys = append(keys, k)
		}
	}
	type section struct {
		mu   sync.Mutex // held only to read and write last
		in   atomic.Int32
		last fence.Token
	}
	sections := make(map[string]*section, len(keys))
	for _, k := range keys {
		sections[k] = &section{}
	}
	var violations atomic.Int32
	run := func(node *Node, key string) error {
		h, err := node.Lock(context.Background(), key, WithWait(10*time.Second))
		if err != nil {
			return err
		}
		s := sections[key]
		if s.in.Add(1) != 1 {
			violations.Add(1)
			t.Errorf("%s: two critical sections at once (token %s)", key, h.Token())
		}
		s.mu.Lock()
		if !s.last.Less(h.Token()) {
			violations.Add(1)
			t.Errorf("%s: token %s not above the last one %s", key, h.Token(), s.last)
		}
		s.last = h.Token()
		s.mu.Unlock()
		s.in.Add(-1)
		return h.Unlock()
	}

	before := n.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := run(n, k); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// The other nodes take each key now and then, so its delegation moves
	// while node 0's goroutines lock it.
	for _, other := range c.nodes[1:] {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := run(other, keys[i%len(keys)]); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.Zero(t, violations.Load())
	after := n.Stats()
	fast := after.LocalFast - before.LocalFast
	slow := after.Admissions - before.Admissions - fast
	t.Logf("node 0: %d fast admissions, %d slow", fast, slow)
	require.Greater(t, fast, uint64(1000), "the repeat path barely ran")
	// Each slow admission is a key coming back after another node took
	// it. With eight goroutines busy on two cores, a handoff waits for the
	// scheduler to run the goroutines that carry it (the transport's, the
	// timer's): without the repeat path's yield (yieldEvery) the keys
	// moved 11-16 times in this test, with it 110-130 (also under the
	// race detector).
	require.Greater(t, slow, uint64(30), "the keys barely moved: the repeat path starves the other nodes")
}

// TestYieldDue: a shard's repeat path yields once per yieldEvery of its
// own readings, whatever the number of locks between.
func TestYieldDue(t *testing.T) {
	var s lockShard
	t0 := bootEpoch.Add(time.Hour)
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{
		{0, true}, // the first reading
		{time.Microsecond, false},
		{yieldEvery - 1, false},
		{yieldEvery, true},
		{yieldEvery + time.Microsecond, false},
		{2*yieldEvery - 1, false},
		{5 * yieldEvery, true},
		{5 * yieldEvery, false},
	} {
		if got := s.yieldDue(bootNanos(t0.Add(c.after))); got != c.want {
			t.Errorf("at +%v: yieldDue %v, want %v", c.after, got, c.want)
		}
	}
}

// TestRepeatPathArmsTheTimer: a section admitted on the repeat path with a
// lease of its own that ends before the timer goroutine's next tick lowers
// that tick to the section's end, with only its shard's lock held, so that
// the section is revoked on time rather than up to a maximum sleep late.
func TestRepeatPathArmsTheTimer(t *testing.T) {
	// Every other wake-up of the node well after the section's end, so
	// that the section's own is the one to find; the section long enough
	// that the timer does not fire (and arm its next tick) before armed is
	// read, even on a loaded machine under the race detector.
	c := newCluster(t, 1, func(c *Config) { c.RetryInterval = 150 * time.Millisecond })
	c.waitAvailable()
	n := c.nodes[0]
	h, err := n.Lock(context.Background(), "armed")
	require.NoError(t, err)
	require.NoError(t, h.Unlock())
	before := n.Stats().LocalFast
	h, err = n.Lock(context.Background(), "armed", WithLease(30*time.Millisecond))
	require.NoError(t, err)
	armed := n.armed.Load()
	require.Equal(t, before+1, n.Stats().LocalFast, "not admitted on the repeat path")
	require.NotZero(t, armed)
	require.LessOrEqual(t, armed, armedAt(deadline.At(h.Expires())), "the timer sleeps past the section's end")
	<-h.Done()
}

// TestShardSlicesOwnTheirLines: the slices the repeat lock writes start a
// cache line long and line-aligned, so that locks on distinct shards on two
// cores do not contend for a line (BenchmarkRepeatLockParallel went from
// 88-104 to 67-69 ns/op when they stopped sharing).
func TestShardSlicesOwnTheirLines(t *testing.T) {
	shards := newLockShards(16)
	for i := range shards {
		s := &shards[i]
		for name, sl := range map[string][]*section{"sections": s.sections, "free": s.free} {
			require.GreaterOrEqual(t, uintptr(cap(sl))*unsafe.Sizeof((*section)(nil)), uintptr(cacheline.Size), "shard %d %s", i, name)
			require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(sl)))%cacheline.Size, "shard %d %s", i, name)
		}
	}
}
