package homelock

import (
	"sync"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/internal/cacheline"
	"github.com/homelock/homelock/internal/deadline"
)

// lockShard is one of the holder's shards (delegation.Config.Shards) as the
// driver sees it: the lock that the repeat path of the shard's keys holds,
// and what that path writes besides the machine.
//
// The repeat lock and unlock hold only their key's shard lock, so locks on
// keys of different shards run on different cores. Every other step of the
// core holds Node.mu and every shard's lock (lockAll): the machine's fast
// path touches nothing outside its key's shard that such a step does not
// hold, and whatever a fast path reads from the driver (closing, failed,
// the core itself) is only written under lockAll.
type lockShard struct {
	mu    sync.Mutex
	index int
	// lockers counts the lockers of this shard's keys; a locker's ID is
	// the count and the shard's index (lockerID).
	lockers uint64
	// sections are the handles of the shard's admitted critical sections,
	// at the slot the holder machine names in their events (Slot - 1), for
	// the events that follow admission (Extended, Revoked). Unlock clears
	// its entry; nothing scans the slice (a periodic scan stalled every lock
	// once a node held a million idle delegations). A slot, not a map keyed
	// by locker: the repeat lock stores and clears one pointer.
	sections []*section
	// free are ended sections kept for reuse (at most keptSections): the
	// repeat lock takes one rather than allocating.
	free []*section
	// yielded is when (bootNanos) a repeat lock of this shard last let its
	// goroutine yield (yieldDue).
	yielded int64
	// A cache line of its own: shards sit side by side and are written
	// from different cores.
	_ cacheline.Pad
}

// shardBits is how many low bits of a locker ID name its shard.
const shardBits = 8

func newLockShards(n int) []lockShard {
	if n > 1<<shardBits {
		panic("homelock: more holder shards than locker IDs can name")
	}
	s := make([]lockShard, n)
	for i := range s {
		s[i].index = i
		// The repeat lock writes both.
		s[i].sections, s[i].free = cacheline.Slice[*section](), cacheline.Slice[*section]()
	}
	return s
}

// shardOf is key's shard, as the holder machine splits keys.
func (n *Node) shardOf(key string) *lockShard {
	return &n.shards[delegation.ShardOf(key, len(n.shards))]
}

// lockerShard is the shard of the key a locker ID was made for: its low
// bits, with no hashing of the key.
func (n *Node) lockerShard(locker uint64) *lockShard {
	return &n.shards[locker&(1<<shardBits-1)]
}

// lockerID returns a new locker ID for a key of s, unique in this node
// (s's lock held).
func (s *lockShard) lockerID() uint64 {
	s.lockers++
	return s.lockers<<shardBits | uint64(s.index)
}

// keptSections bounds a shard's free sections: enough for the critical
// sections that run at once on one shard's keys, not a node's peak.
const keptSections = 64

// section is the section admitted at slot, nil if none.
func (s *lockShard) section(slot uint32) *section {
	if slot == 0 || int(slot) > len(s.sections) {
		return nil
	}
	return s.sections[slot-1]
}

// setSection keeps h at slot (nil clears it).
func (s *lockShard) setSection(slot uint32, h *section) {
	for int(slot) > len(s.sections) {
		s.sections = append(s.sections, nil)
	}
	s.sections[slot-1] = h
}

// take returns a section for a new generation: a kept one or a new one.
func (s *lockShard) take(n *Node) *section {
	if k := len(s.free); k > 0 {
		sec := s.free[k-1]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		return sec
	}
	return &section{n: n}
}

// keep keeps an ended section for reuse, if there is room.
func (s *lockShard) keep(sec *section) {
	if len(s.free) < keptSections {
		s.free = append(s.free, sec)
	}
}

// lockAll takes Node.mu and every shard's lock, in one order: what a step
// of the core needs.
func (n *Node) lockAll() {
	n.mu.Lock()
	n.lockShards()
}

func (n *Node) lockShards() {
	for i := range n.shards {
		n.shards[i].mu.Lock()
	}
}

// unlockAll steps what the transport left in the inbox meanwhile, then lets
// every lock go. An envelope left after that last look found its handler's
// TryLock failing (the locks were still held), so unlockAll looks again
// once it has let go, and steps it if it gets the locks back; if another
// goroutine got them, that one will. A goroutine that keeps finding more
// (a caller's Unlock under a steady stream of messages) hands the rest to
// the timer goroutine after a few rounds instead of serving them all.
func (n *Node) unlockAll() {
	for round := 0; ; round++ {
		n.drainInbox()
		for i := range n.shards {
			n.shards[i].mu.Unlock()
		}
		n.mu.Unlock()
		if !n.in.waiting() {
			return
		}
		if round == maxDrainRounds {
			n.kickTimer() // its tick steps them
			return
		}
		if !n.mu.TryLock() {
			return // its holder steps them
		}
		n.lockShards()
	}
}

// maxDrainRounds bounds how often one unlockAll takes the locks back for
// envelopes that arrived while it let them go.
const maxDrainRounds = 4

// lowerArmed makes the timer goroutine wake by d if it sleeps towards a
// later tick, from the repeat path (only its shard's lock held): the armed
// time is lowered atomically, and the goroutine kicked only by the caller
// that lowered it.
func (n *Node) lowerArmed(d deadline.Instant) {
	if d.IsZero() {
		return
	}
	at := armedAt(d)
	for {
		cur := n.armed.Load()
		if cur != 0 && at >= cur {
			return
		}
		if n.armed.CompareAndSwap(cur, at) {
			n.kickTimer()
			return
		}
	}
}

func (n *Node) kickTimer() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// armedAt is t in Node.armed's form: nanoseconds since bootEpoch, never
// 0, which stands for no tick armed.
func armedAt(t deadline.Instant) int64 { return max(instantBootNanos(t), 1) }

// yieldEvery is how often a shard's repeat path yields its processor.
//
// A goroutine that loops on the repeat path never blocks, and Go's
// scheduler runs the goroutines the network readies (the transport's,
// carrying another node's Recall or Acquire) from its global queue only
// every 61st scheduling of a processor: eight such loops on two cores kept
// another node waiting 0.3 s at the median and up to 0.8 s for a key they
// held. A yield every millisecond per shard costs a scheduling a
// millisecond and brought that wait down to 15 ms at the median, 45 ms at
// most (docs/design.md, "Yielding on a busy repeat path").
const yieldEvery = time.Millisecond

// yieldDue reports whether the repeat lock that read t (bootNanos) should
// yield after letting go of the shard (s.mu held).
func (s *lockShard) yieldDue(t int64) bool {
	if t-s.yielded < int64(yieldEvery) {
		return false
	}
	s.yielded = t
	return true
}
