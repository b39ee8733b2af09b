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
type Handle struct {
	n      *Node
	key    string
	locker uint64
	token  fence.Token
	signed []byte
	// expires is the lease end in nanoseconds on the node's lease clock
	// (since bootEpoch); renewals move it (Extended events).
	expires atomic.Int64
	state   atomic.Uint32
	// slot is where the key's shard keeps the handle (lockShard.sections).
	slot uint32

	mu    sync.Mutex
	ended bool
	scope Scope
	// more is made on first use (Done, Context) or for a node-scope lock,
	// so that the repeat path's one allocation is a Handle of 128 bytes, a
	// malloc size class: a field more here moves it to the next (144).
	more *handleMore
}

// handleMore is the part of a Handle that most critical sections never
// need (mu guards it).
type handleMore struct {
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	// Node scope only.
	local *localLock
	timer *time.Timer
}

// extra returns h.more, made if need be (mu held).
func (h *Handle) extra() *handleMore {
	if h.more == nil {
		h.more = new(handleMore)
	}
	return h.more
}

const (
	stateHeld uint32 = iota
	stateReleased
	stateLost
)

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Key is the locked key.
func (h *Handle) Key() string { return h.key }

// Token is the critical section's fencing token: (epoch, home incarnation,
// counter) of the delegation it was admitted under, and its section, the
// node's admission sequence within that delegation. Every critical section
// on a key gets a token above every earlier one's, the repeat path through
// one node included (still with no message), so a resource refuses a paused
// earlier section of this node as it refuses another node's. A ScopeNode
// token has Epoch 0.
func (h *Handle) Token() fence.Token { return h.token }

// Grant is the signed lockGrant.v1 (nil when the node has no key ring): the
// home's statement, bound to the key, this node's ID, the cluster ID and
// Config.GrantOperation, that a fence.Guard verifies.
func (h *Handle) Grant() []byte { return h.signed }

// Scope is ScopeCluster or ScopeNode.
func (h *Handle) Scope() Scope { return h.scope }

// Expires is when the lease ends on this node's lease clock (Config.Clock).
func (h *Handle) Expires() time.Time { return bootEpoch.Add(time.Duration(h.expires.Load())) }

// Remaining is how long the critical section may still run on this node's
// lease clock: 0 once Valid fails. A process that holds the lock on behalf
// of another (homelock lock's command) hands this on, so that the other can
// stop in time when this node goes silent.
func (h *Handle) Remaining() time.Duration {
	if h.state.Load() != stateHeld {
		return 0
	}
	exp := h.expires.Load()
	if exp == math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(exp-int64(h.n.clock.Now().Sub(bootEpoch))), 0)
}

// Valid returns nil while the critical section may still commit, and an
// error wrapping ErrLeaseExpired once its lease ran out on this node's clock,
// it was revoked (its delegation lost), or it was unlocked.
func (h *Handle) Valid() error {
	switch h.state.Load() {
	case stateReleased:
		return fmt.Errorf("%w: key %q token %s: unlocked", ErrLeaseExpired, h.key, h.token)
	case stateLost:
		return fmt.Errorf("%w: key %q token %s: revoked", ErrLeaseExpired, h.key, h.token)
	}
	if int64(h.n.clock.Now().Sub(bootEpoch)) >= h.expires.Load() {
		return fmt.Errorf("%w: key %q token %s: lease ran out", ErrLeaseExpired, h.key, h.token)
	}
	return nil
}

// Done is closed when the critical section ends: unlocked, revoked, or its
// lease ran out.
func (h *Handle) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.extra()
	if x.done == nil {
		if h.ended {
			return closedChan
		}
		x.done = make(chan struct{})
	}
	return x.done
}

// Context is cancelled when Done closes; pass it to the work the critical
// section does.
func (h *Handle) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.extra()
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithCancel(context.Background())
		if h.ended {
			x.cancel()
		}
	}
	return x.ctx
}

// Unlock ends the critical section. It is idempotent: it returns nil once
// the lock is released, and an error wrapping ErrLeaseExpired, every time,
// if the lease had been lost before (a write made since must not count).
func (h *Handle) Unlock() error {
	if !h.state.CompareAndSwap(stateHeld, stateReleased) {
		if h.state.Load() == stateLost {
			return fmt.Errorf("%w: key %q token %s: lost before unlock", ErrLeaseExpired, h.key, h.token)
		}
		return nil
	}
	if h.scope == ScopeNode {
		h.n.unlockLocal(h)
	} else {
		h.n.unlock(h)
	}
	h.finish()
	return nil
}

// end marks the handle lost (revoked, expired, node closed) unless it was
// already unlocked, and wakes Done and Context.
func (h *Handle) end(state uint32) {
	h.state.CompareAndSwap(stateHeld, state)
	h.finish()
}

func (h *Handle) finish() {
	h.expires.Store(math.MinInt64)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.ended = true
	if x := h.more; x != nil {
		if x.done != nil {
			close(x.done)
		}
		if x.cancel != nil {
			x.cancel()
		}
	}
}

// unlock ends h's critical section in the holder. The common unlock (nobody
// queued here, the delegation not draining) holds only the key's shard's
// lock and needs no clock read (one is ~100 ns here); the rest is a step.
func (n *Node) unlock(h *Handle) {
	s := n.lockerShard(h.locker)
	s.mu.Lock()
	if s.section(h.slot) == h {
		s.setSection(h.slot, nil)
	}
	done := !n.usable() || n.core.TryUnlockIn(s.index, h.key, h.locker)
	s.mu.Unlock()
	if done {
		return
	}
	n.lockAll()
	if n.usable() {
		now := n.clock.Now()
		if rd, ok := n.core.Unlock(now, h.key, h.locker); ok {
			n.apply(now, rd)
		}
	}
	n.unlockAll()
}
