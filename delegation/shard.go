package delegation

import (
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/homelock/homelock/internal/cacheline"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/keytab"
)

// shard is one group of keys with everything the zero-message fast path
// (TryAdmit, TryUnlockIn) writes: the keys' states, their wake-ups, the
// admitted critical sections and the fast path's counters. Nothing on that
// path writes outside its key's shard, so a driver may run the fast path of
// keys in different shards at once, each under a lock of its own, while
// every other input holds all of them (Config.Shards).
type shard struct {
	keys   keytab.Table[keyState]
	timers deadline.Heap[keyState]
	// handles are the admitted critical sections (keyState.active), with
	// the free slots to reuse.
	handles     []handle
	freeHandles []uint32
	admissions  uint64
	localFast   uint64
	// Shards sit side by side in one slice and are written from different
	// cores: a cache line of their own each, so one core's fast path does
	// not invalidate another's.
	_ cacheline.Pad
}

func newShard() shard {
	return shard{keys: keytab.New(func(ks *keyState) string { return ks.key }),
		timers: deadline.NewHeap(func(ks *keyState) *uint32 { return &ks.pos }),
		// The fast path writes both.
		handles: cacheline.Slice[handle](), freeHandles: cacheline.Slice[uint32]()}
}

// ShardOf is the shard of key among n: the same for every machine and every
// run, so that a seeded simulation replays.
func ShardOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := xxhash.Sum64String(key)
	if n&(n-1) == 0 {
		// The same shard as the modulo below, without a division, which
		// was a measurable part of the repeat lock.
		return int(h & uint64(n-1))
	}
	return int(h % uint64(n))
}

func (m *Machine) shardOf(key string) *shard { return &m.shards[ShardOf(key, len(m.shards))] }

// get returns key's state, nil if there is none.
func (m *Machine) get(key string) *keyState { return m.shardOf(key).keys.Get(key) }

// sortedKeys returns every key, sorted: inputs that visit every key visit
// them in one order however many shards there are.
func (m *Machine) sortedKeys() []string {
	if len(m.shards) == 1 {
		return m.shards[0].keys.Keys()
	}
	var keys []string
	for i := range m.shards {
		keys = append(keys, m.shards[i].keys.Keys()...)
	}
	slices.Sort(keys)
	return keys
}

// NextDeadlineAt is when Tick next has work in shard i (ShardOf); zero when
// none. The fast path adds a wake-up only in its key's shard, so a driver
// compares this alone with the tick it sleeps towards.
func (m *Machine) NextDeadlineAt(i int) deadline.Instant { return m.shards[i].timers.Next() }

// nextDue is the shard whose next wake-up is earliest and not after now
// (the lowest-numbered on a tie, so that a run replays), or nil.
func (m *Machine) nextDue(now deadline.Instant) *shard {
	var due *shard
	for i := range m.shards {
		s := &m.shards[i]
		if at := s.timers.Next(); !at.IsZero() && !at.After(now) && (due == nil || at.Before(due.timers.Next())) {
			due = s
		}
	}
	return due
}
