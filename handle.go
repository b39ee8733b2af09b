package homelock

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock/fence"
)

// Handle is one admitted critical section on one key. Check Valid before a
// write commits (or let a fence.Guard check Grant and Token), and Unlock when
// done. Its methods are safe for concurrent use.
//
// A Handle is a small value: copy it freely; every copy names the same
// critical section. The zero Handle holds nothing (Unlock returns nil, Valid
// an error). Key, Token, Grant and Scope stay what they were after the
// section ends. The node reuses the record behind an unlocked Handle for a
// later critical section, so the repeat lock allocates nothing; a Handle
// carries the generation it was issued for, and a Handle whose section has
// ended reads as unlocked (or revoked), never as a later section.
type Handle struct {
	s      *section // nil for the zero Handle
	gen    uint64   // the generation of s this Handle was issued for
	key    string
	token  fence.Token
	signed []byte
	scope  Scope
}

// section is the node's record of an admitted critical section, reused
// generation after generation (by the key's shard, after an unlock).
type section struct {
	n *Node
	// word is the generation and the state: gen<<stateBits | state. The
	// generation moves on only when the section is reused, after an
	// unlock; so a Handle of an older generation sees "unlocked".
	word atomic.Uint64
	// expires is the lease end in nanoseconds on the node's lease clock
	// (since bootEpoch); renewals move it (Extended events).
	expires atomic.Int64
	// locker and slot are where the holder machine and the key's shard
	// keep the section (lockShard.sections). They change only on reuse.
	locker uint64
	slot   uint32
	// asked is set before Done or Context looks at the state, so that
	// finish, which runs after the state left held, needs the mutex only
	// if one of them may have made something to close.
	asked atomic.Bool
	// lost says why the section was lost, for Valid and Unlock: set before
	// the state moves to lost, and a lost section is never reused.
	lost atomic.Pointer[string]

	mu sync.Mutex
	// more is made on first use (Done, Context) or for a node-scope lock,
	// and dropped when the section ends.
	more *handleMore
}

// handleMore is the part of a section that most critical sections never
// need (mu guards it).
type handleMore struct {
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	// Node scope only.
	local *localLock
	timer *time.Timer
}

const (
	stateHeld uint64 = iota
	stateReleased
	stateLost

	stateBits = 2
	stateMask = 1<<stateBits - 1
)

// packWord is a section's word for generation gen in state.
func packWord(gen, state uint64) uint64 { return gen<<stateBits | state }

var (
	closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	// endedCtx is the Context of a section that has ended.
	endedCtx = func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
)

// Key is the locked key.
func (h Handle) Key() string { return h.key }

// Token is the critical section's fencing token: (epoch, home incarnation,
// counter) of the delegation it was admitted under, and its section, the
// node's admission sequence within that delegation. Every critical section
// on a key gets a token above every earlier one's, the repeat path through
// one node included (still with no message), so a resource refuses a paused
// earlier section of this node as it refuses another node's. A ScopeNode
// token has Epoch 0.
func (h Handle) Token() fence.Token { return h.token }

// Grant is the signed lockGrant.v1 (nil when the node has no key ring): the
// home's statement, bound to the key, this node's ID, the cluster ID and
// Config.GrantOperation, that a fence.Guard verifies. It is shared: do not
// modify it.
func (h Handle) Grant() []byte { return h.signed }

// Scope is ScopeCluster or ScopeNode.
func (h Handle) Scope() Scope { return h.scope }

// state is h's section's state and lease end, read as one: a section
// reused since (a later generation) reads as released, and a section that
// is not held has no lease left (so the unlock need not also store that).
func (h Handle) state() (state uint64, expires int64) {
	if h.s == nil {
		return stateReleased, math.MinInt64
	}
	for {
		w := h.s.word.Load()
		if w>>stateBits != h.gen {
			return stateReleased, math.MinInt64
		}
		if w&stateMask != stateHeld {
			return w & stateMask, math.MinInt64
		}
		exp := h.s.expires.Load()
		if h.s.word.Load() == w {
			return stateHeld, exp
		}
	}
}

// Expires is when the lease ends on this node's lease clock (Config.Clock).
func (h Handle) Expires() time.Time {
	_, exp := h.state()
	return bootEpoch.Add(time.Duration(exp))
}

// Remaining is how long the critical section may still run on this node's
// lease clock: 0 once Valid fails. A process that holds the lock on behalf
// of another (homelock lock's command) hands this on, so that the other can
// stop in time when this node goes silent.
func (h Handle) Remaining() time.Duration {
	st, exp := h.state()
	if st != stateHeld {
		return 0
	}
	if exp == math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(exp-bootNanos(h.s.n.clock.Now())), 0)
}

// Valid returns nil while the critical section may still commit, and an
// error wrapping ErrLeaseExpired once its lease ran out on this node's clock,
// it was revoked (its delegation lost), or it was unlocked. A lost section's
// error says why ("lost: delegation lease expired", "lost: clock jump", ...:
// docs/locks.md, "What a user sees").
func (h Handle) Valid() error {
	st, exp := h.state()
	switch {
	case h.s == nil:
		return fmt.Errorf("%w: key %q: no critical section (the zero Handle)", ErrLeaseExpired, h.key)
	case st == stateReleased:
		return fmt.Errorf("%w: key %q token %s: unlocked", ErrLeaseExpired, h.key, h.token)
	case st == stateLost:
		return fmt.Errorf("%w: key %q token %s: lost: %s", ErrLeaseExpired, h.key, h.token, h.s.lostWhy())
	}
	if bootNanos(h.s.n.clock.Now()) >= exp {
		return fmt.Errorf("%w: key %q token %s: lease ran out", ErrLeaseExpired, h.key, h.token)
	}
	return nil
}

// Done is closed when the critical section ends: unlocked, revoked, or its
// lease ran out.
func (h Handle) Done() <-chan struct{} {
	done := closedChan
	h.withMore(func(x *handleMore) {
		if x.done == nil {
			x.done = make(chan struct{})
		}
		done = x.done
	})
	return done
}

// Context is cancelled when Done closes; pass it to the work the critical
// section does.
func (h Handle) Context() context.Context {
	ctx := endedCtx
	h.withMore(func(x *handleMore) {
		if x.ctx == nil {
			x.ctx, x.cancel = context.WithCancel(context.Background())
		}
		ctx = x.ctx
	})
	return ctx
}

// withMore runs f on the extras of h's section, made if need be, under the
// section's mutex, unless the section has ended: finish, which drops them,
// then has f's channel or context to close.
func (h Handle) withMore(f func(*handleMore)) {
	if h.s == nil {
		return
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.asked.Store(true)
	if h.s.word.Load() == packWord(h.gen, stateHeld) {
		f(h.s.extra())
	}
}

// extra returns s.more, made if need be (mu held).
func (s *section) extra() *handleMore {
	if s.more == nil {
		s.more = new(handleMore)
	}
	return s.more
}

// Unlock ends the critical section. It is idempotent: it returns nil once
// the section has ended by an unlock (of this Handle or a copy), and an error
// wrapping ErrLeaseExpired if the section was lost before it.
func (h Handle) Unlock() error {
	if h.s == nil {
		return nil
	}
	if !h.s.word.CompareAndSwap(packWord(h.gen, stateHeld), packWord(h.gen, stateReleased)) {
		if h.s.word.Load() == packWord(h.gen, stateLost) {
			return fmt.Errorf("%w: key %q token %s: lost before unlock: %s", ErrLeaseExpired, h.key, h.token, h.s.lostWhy())
		}
		return nil
	}
	if h.scope == ScopeNode {
		h.s.n.unlockLocal(h.s, h.key)
		h.s.finish()
	} else {
		h.s.n.unlock(h.s, h.key)
	}
	return nil
}

// end marks the section lost for why (revoked, expired, node closed) unless
// it was already unlocked, and wakes Done and Context.
func (s *section) end(why string) {
	if w := s.word.Load(); w&stateMask == stateHeld {
		s.lose(w, why)
	}
	s.finish()
}

// lose moves the section from held word w to lost, for why; false if the
// state had moved on (an Unlock came first).
func (s *section) lose(w uint64, why string) bool {
	s.lost.Store(&why)
	return s.word.CompareAndSwap(w, w&^stateMask|stateLost)
}

// lostWhy is why a lost section was lost (lose, the only way into lost,
// stored it first).
func (s *section) lostWhy() string { return *s.lost.Load() }

// finish wakes Done and Context of a section whose state has left held.
// A second call finds nothing to wake.
func (s *section) finish() {
	if !s.asked.Load() {
		// No Done or Context came before the state left held, and any
		// that comes now sees it ended: nothing to close.
		return
	}
	s.mu.Lock()
	x := s.more
	s.more = nil
	s.asked.Store(false)
	s.mu.Unlock()
	if x != nil {
		if x.done != nil {
			close(x.done)
		}
		if x.cancel != nil {
			x.cancel()
		}
	}
}

// unlock ends the critical section of sec on key in the holder. The common
// unlock (nobody queued here, the delegation not draining) holds only the
// key's shard's lock and needs no clock read (one is ~60 ns here); the rest
// is a step. The section is then finished and kept for reuse by the shard
// (the Handle's state CAS made this call the only one for its generation),
// finished first and under the shard's lock: once kept, the next Lock may
// write the next generation's lease end and extras.
func (n *Node) unlock(sec *section, key string) {
	s := n.lockerShard(sec.locker)
	s.mu.Lock()
	if s.section(sec.slot) == sec {
		s.setSection(sec.slot, nil)
	}
	done := !n.usable() || n.core.TryUnlockIn(s.index, key, sec.locker)
	if done {
		sec.finish()
		s.keep(sec)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	n.lockAll()
	if n.usable() {
		now := n.stepNow()
		if rd, ok := n.core.Unlock(now, key, sec.locker); ok {
			n.apply(now, rd)
		}
	}
	sec.finish()
	s.keep(sec)
	n.unlockAll()
}
