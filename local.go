package homelock

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/fence"
)

// localLocks are ScopeNode locks: one context-aware mutex per key, on this
// node only. They need no epoch, no home and no network.
type localLocks struct {
	mu      sync.Mutex
	m       map[string]*localLock
	counter uint64
}

// localLock is a mutex as a one-slot channel, so waiting can be cancelled.
type localLock struct {
	slot chan struct{}
	refs int
}

func (l *localLocks) get(key string) *localLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll := l.m[key]
	if ll == nil {
		ll = &localLock{slot: make(chan struct{}, 1)}
		l.m[key] = ll
	}
	ll.refs++
	return ll
}

func (l *localLocks) put(key string, ll *localLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ll.refs--; ll.refs == 0 {
		delete(l.m, key)
	}
}

func (l *localLocks) next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counter++
	return l.counter
}

// lockLocal takes key's node-scope lock.
func (n *Node) lockLocal(ctx context.Context, key string, o lockOptions, try bool) (Handle, error) {
	n.mu.Lock()
	err := n.admissible(key)
	n.mu.Unlock()
	n.drainIfFree() // an envelope received meanwhile found mu taken
	if err != nil {
		return Handle{}, err
	}
	ll := n.local.get(key)
	select {
	case ll.slot <- struct{}{}:
	default:
		if try {
			n.local.put(key, ll)
			return Handle{}, fmt.Errorf("%w: key %q: held by another node-scope locker", ErrTimeout, key)
		}
		t := time.NewTimer(o.wait)
		defer t.Stop()
		select {
		case ll.slot <- struct{}{}:
		case <-t.C:
			n.local.put(key, ll)
			return Handle{}, fmt.Errorf("%w: key %q: node-scope lock still held after %v", ErrTimeout, key, o.wait)
		case <-ctx.Done():
			n.local.put(key, ll)
			return Handle{}, fmt.Errorf("homelock: key %q: %w", key, ctx.Err())
		}
	}
	// A node-scope section is never reused: its generation is the first.
	// Its extras (the local lock, the lease timer) are written here,
	// before the Handle exists, and read only by the one caller that moves
	// the state out of held (Unlock or the timer), before finish drops them.
	sec := &section{n: n, more: &handleMore{local: ll}}
	h := Handle{s: sec, gen: 1, key: key, scope: ScopeNode,
		token: fence.Token{Epoch: 0, Incarnation: n.inc, Counter: n.local.next()}}
	ttl, expires := n.cfg.MaxLease, int64(math.MaxInt64)
	if o.lease > 0 {
		ttl, expires = o.lease, bootNanos(n.clock.Now().Add(o.lease))
	}
	sec.expires.Store(expires)
	sec.word.Store(packWord(h.gen, stateHeld))
	if o.lease > 0 {
		sec.more.timer = time.AfterFunc(o.lease, func() {
			if sec.lose(packWord(h.gen, stateHeld), delegation.DetailLeaseRanOut) {
				n.releaseLocal(sec, key) // the timer fired: nothing to stop
				sec.finish()
			}
		})
	}
	if n.ring != nil {
		h.signed, _ = n.ring.Sign(fence.Grant{
			Resource: key, Owner: n.cfg.NodeID, RequestID: "node." + strconv.FormatUint(h.token.Counter, 10),
			Lease: h.token.String(), Token: h.token, Domain: n.cfg.ClusterID, TTL: ttl,
			Operation: n.cfg.GrantOperation, Scope: fence.ScopeNode,
		})
	}
	return h, nil
}

// unlockLocal frees a node-scope lock (once per handle: the state CAS).
func (n *Node) unlockLocal(sec *section, key string) {
	if t := sec.more.timer; t != nil {
		t.Stop()
	}
	n.releaseLocal(sec, key)
}

func (n *Node) releaseLocal(sec *section, key string) {
	ll := sec.more.local
	<-ll.slot
	n.local.put(key, ll)
}
