package homelock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/fence"
)

// Scope says what a lock guarantees.
type Scope = fence.Scope

const (
	// ScopeCluster (the default): mutual exclusion across every node of the
	// cluster, arbitrated by the key's home, with a cluster fencing token.
	ScopeCluster = fence.ScopeCluster
	// ScopeNode: a node-local lock that excludes only lockers on this node,
	// with no cluster guarantee. It is the opt-in fallback while the cluster
	// cannot grant (say, during a protocol version upgrade). Its tokens have
	// Epoch 0, which no cluster token has (epochs start at 1), and its signed
	// grants say fence.ScopeNode, which a cluster-domain Guard refuses.
	ScopeNode = fence.ScopeNode
)

// LockOption changes one Lock call. Options are plain values, so passing
// them costs no allocation.
type LockOption struct {
	set    uint8
	lease  time.Duration
	wait   time.Duration
	silent time.Duration
	scope  Scope
}

const (
	optLease uint8 = 1 << iota
	optWait
	optScope
	optHomeSilence
)

// WithLease bounds the critical section: its handle is revoked d after
// admission even if the delegation lives on. Without it, the critical section
// lasts while this node's delegation is renewed (it is renewed while in use).
// It never outlives the delegation.
func WithLease(d time.Duration) LockOption { return LockOption{set: optLease, lease: d} }

// WithWait bounds how long Lock waits (Config.DefaultWait without it; a
// sooner context deadline wins).
func WithWait(d time.Duration) LockOption { return LockOption{set: optWait, wait: d} }

// WithScope selects ScopeCluster (default) or ScopeNode.
func WithScope(s Scope) LockOption { return LockOption{set: optScope, scope: s} }

// WithHomeSilence gives up early on a home that answers nothing: Lock fails
// with ErrLockUnavailable once the key's home has not answered its request
// for d, instead of waiting out the wait. A home that answers (the key is
// held elsewhere, the home is in its gate) is waited for as usual, and so
// is a section on this node. It is for a caller that can ask the lock of
// another node, one that may reach the home (the lock command with several
// --node addresses does): a home cut off from this node alone never
// answers it, while the cluster keeps it as a member.
func WithHomeSilence(d time.Duration) LockOption {
	return LockOption{set: optHomeSilence, silent: d}
}

type lockOptions struct {
	lease, wait, silent time.Duration
	waitSet             bool
	scope               Scope
}

// defaultOptions are a Lock's options when it is given none.
func (n *Node) defaultOptions() lockOptions {
	return lockOptions{wait: n.cfg.DefaultWait, scope: ScopeCluster}
}

func (n *Node) options(opts []LockOption) (lockOptions, error) {
	o := n.defaultOptions()
	for _, op := range opts {
		if op.set&optLease != 0 {
			if op.lease <= 0 {
				return o, fmt.Errorf("%w: WithLease (%v) must be positive", errBadOption, op.lease)
			}
			o.lease = op.lease
		}
		if op.set&optWait != 0 {
			if op.wait < 0 {
				return o, fmt.Errorf("%w: WithWait (%v) must not be negative", errBadOption, op.wait)
			}
			o.wait, o.waitSet = op.wait, true
		}
		if op.set&optHomeSilence != 0 {
			if op.silent <= 0 {
				return o, fmt.Errorf("%w: WithHomeSilence (%v) must be positive", errBadOption, op.silent)
			}
			o.silent = op.silent
		}
		if op.set&optScope != 0 {
			if op.scope != ScopeCluster && op.scope != ScopeNode {
				return o, fmt.Errorf("%w: WithScope (%d) must be ScopeCluster or ScopeNode", errBadOption, op.scope)
			}
			o.scope = op.scope
		}
	}
	return o, nil
}

var (
	errBadOption = ErrInvalidOption
	errEmptyKey  = errors.New("homelock: empty key")
)

// Lock acquires key and returns a Handle for the critical section. When this
// node holds the key's delegation and nobody waits, it is a local mutex: no
// network message. Otherwise it asks the key's home and waits, up to the
// wait (WithWait, Config.DefaultWait) or ctx, whichever ends first.
//
// Errors: ErrTimeout (still queued behind a holder at the deadline),
// ErrLockUnavailable (no epoch, not a member, version mismatch, home without
// liveness), ErrTooManyDelegations, ErrHookFailed, ErrClosed; a cancelled
// ctx returns its error wrapped (with ErrTimeout too if its deadline passed).
func (n *Node) Lock(ctx context.Context, key string, opts ...LockOption) (h Handle, err error) {
	// Without options (the repeat lock's usual call) no call of options:
	// its checks cost the repeat lock about 15 ns (8f8142a).
	o := n.defaultOptions()
	if len(opts) > 0 {
		var err error
		if o, err = n.options(opts); err != nil {
			return Handle{}, err
		}
	}
	if key == "" {
		return Handle{}, errEmptyKey
	}
	if o.scope == ScopeNode {
		return n.lockLocal(ctx, key, o, false)
	}
	// The repeat path writes its Handle straight into this result:
	// returned by value through one more call it cost a few ns.
	s, ok, err := n.lockRepeat(ctx, key, o.lease, &h)
	if ok || err != nil {
		return h, err
	}
	return n.lockAsk(ctx, s, key, o, false)
}

// TryLock is Lock that does not queue behind a holder: it returns
// ErrTimeout at once when another local critical section holds the key, and
// otherwise asks the key's home and waits only for its answer (WithWait if
// given, else 4 × Config.RetryInterval): a key held elsewhere comes back
// as ErrTimeout.
func (n *Node) TryLock(ctx context.Context, key string, opts ...LockOption) (h Handle, err error) {
	o, err := n.options(opts)
	if err != nil {
		return Handle{}, err
	}
	if key == "" {
		return Handle{}, errEmptyKey
	}
	if !o.waitSet {
		o.wait = 4 * n.cfg.RetryInterval
	}
	if o.scope == ScopeNode {
		return n.lockLocal(ctx, key, o, true)
	}
	s, ok, err := n.lockRepeat(ctx, key, o.lease, &h)
	if ok || err != nil {
		return h, err
	}
	return n.lockAsk(ctx, s, key, o, true)
}

// lockRepeat is the repeat path: a delegation held here, nobody admitted or
// queued. Only the key's shard is locked, and the clock is read under that
// lock: a reading taken before waiting for it could admit on a delegation
// that expired meanwhile. It reports ok with *h set when it admitted, and
// otherwise the key's shard, unlocked, for lockAsk.
func (n *Node) lockRepeat(ctx context.Context, key string, lease time.Duration, h *Handle) (s *lockShard, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("homelock: key %q: %w", key, err)
	}
	s = n.shardOf(key)
	s.mu.Lock()
	if err := n.admissible(key); err != nil {
		s.mu.Unlock()
		return nil, false, err
	}
	var a delegation.Admission
	if now, locker := n.nowInstant(), s.lockerID(); n.core.TryAdmitAt(s.index, now, key, locker, lease, &a) {
		n.admittedAt(s, key, locker, &a, h)
		// Only the key's shard's wake-ups can have moved.
		n.lowerArmed(n.core.Holder().NextDeadlineAt(s.index))
		yield := s.yieldDue(instantBootNanos(now))
		s.mu.Unlock()
		if yield {
			runtime.Gosched()
		}
		return s, true, nil
	}
	s.mu.Unlock()
	return s, false, nil
}

// lockAsk is the rest of a Lock when the repeat path could not admit: it
// asks the key's home (or queues behind a local section) and waits.
func (n *Node) lockAsk(ctx context.Context, s *lockShard, key string, o lockOptions, try bool) (Handle, error) {
	n.lockAll()
	if err := n.admissible(key); err != nil {
		n.unlockAll()
		return Handle{}, err
	}
	now := n.stepNow()
	locker := s.lockerID()
	if !n.lockable {
		_, why := n.core.Lockable(now)
		n.unlockAll()
		return Handle{}, fmt.Errorf("%w: key %q: %s", ErrLockUnavailable, key, why)
	}
	if try {
		if _, _, active, held := n.core.Holder().Holding(key); held && active {
			n.unlockAll()
			return Handle{}, fmt.Errorf("%w: key %q: held by another critical section on this node", ErrTimeout, key)
		}
	}
	deadline := now.Add(o.wait)
	if dl, ok := ctx.Deadline(); ok {
		if d := now.Add(time.Until(dl)); d.Before(deadline) {
			deadline = d
		}
	}
	w := &waiter{key: key, done: make(chan struct{})}
	n.waiters[locker] = w
	n.apply(now, n.core.Lock(now, key, locker, deadline, o.lease, o.silent))
	n.unlockAll()

	select {
	case <-w.done:
		return w.h, w.err
	case <-ctx.Done():
	}
	n.lockAll()
	if _, waiting := n.waiters[locker]; !waiting {
		// Answered meanwhile: the answer stands.
		n.unlockAll()
		<-w.done
		return w.h, w.err
	}
	delete(n.waiters, locker)
	if n.usable() {
		now := n.stepNow()
		n.apply(now, n.core.Cancel(now, key, locker))
	}
	n.unlockAll()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Handle{}, fmt.Errorf("%w: key %q: %w", ErrTimeout, key, ctx.Err())
	}
	return Handle{}, fmt.Errorf("homelock: key %q: %w", key, ctx.Err())
}

// LockAll locks every key in one global order (sorted, duplicates dropped),
// so that two LockAll calls over overlapping keys never deadlock. It returns
// the handles in that order; on an error it unlocks what it took.
func (n *Node) LockAll(ctx context.Context, keys ...string) ([]Handle, error) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	hs := make([]Handle, 0, len(keys))
	for _, k := range keys {
		h, err := n.Lock(ctx, k)
		if err != nil {
			for i := len(hs) - 1; i >= 0; i-- {
				_ = hs[i].Unlock()
			}
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// CountFencedWrite counts one write that the embedding store refused by its
// fence (fence.ErrStaleOwner and kin) or under an invalid handle; it shows in
// Stats.FencedWrites and the metrics.
func (n *Node) CountFencedWrite() { n.fencedWrites.Add(1) }
