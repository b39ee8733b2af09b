// Package homelock gives a replicated database cluster-wide lock(key) with
// fencing tokens, and no network message at all when a node keeps locking
// the same key.
//
// Each process of the store embeds one Node:
//
//	node, err := homelock.Open(ctx, cfg)   // cfg from DefaultConfig
//	h, err := node.Lock(ctx, "orders/42")  // ErrTimeout, ErrLockUnavailable, ...
//	... stage the write tagged with h.Token() (a fence.Guard checks h.Grant()) ...
//	if h.Valid() == nil { commit }         // ErrLeaseExpired: do not commit
//	h.Unlock()
//
// # How it works
//
// Every key has one arbiter, its home node, picked by rendezvous hashing over
// the members of an agreed membership epoch. The home hands out delegations:
// the leased right for one node to admit critical sections on one key
// locally. While a node holds a key's delegation, Lock and Unlock are a local
// mutex (Stats.LocalFast). When another node asks, the home recalls it, the
// holder drains (its critical section ends, the store's Barrier hook settles
// the writes), and the next holder gets a larger token
// (epoch, home incarnation, counter). A critical section that is running
// when the recall comes keeps the lock while this node is alive: its
// delegation is renewed until it ends. Each critical section's token adds
// its section, the admission sequence within the delegation, so every one
// is fenced apart (docs/locks.md). The protocol lives in the pure state
// machines epoch, home and delegation, composed by internal/core; this
// package only drives them (docs/design.md in the repository describes the
// protocol as built, docs/locks.md what a lock guarantees; internal/core/doc.go
// the composition).
//
// # The driver
//
// Every input — a message from the transport, the timer, a Lock that must
// ask, an Unlock that hands on, a store hook finishing — is one step of the
// core, under the node mutex and every shard lock (shards.go), and each
// step's Ready is carried out in order: the durable writes are committed to
// the Pebble store (synced) first, then the messages are handed to the
// transport (which never blocks), then the events go to the waiting lockers
// or start store hooks. A message the transport hands over waits in an
// inbox (inbox.go) if another step holds the locks: that step runs it, in
// the order received, before letting go, so the transport never waits on
// the node. The repeat lock and unlock of a key whose delegation
// this node holds take only the key's shard lock, so they run on every core
// at once. Store hooks run on worker goroutines kept while hooks keep
// coming (a second idle ends one), off the locks, bounded by the
// delegation's lease, and report back tagged with the token. One timer goroutine sleeps until the core's next deadline (at most
// 100ms) and ticks; on each tick, and on every other step taken under the
// node's locks, the wall clock is read around the lease clock for the core
// to judge a clock jump (core.ObserveClocks). Every RetryInterval the timer
// goroutine also hands memberlist's view to the core's membership decisions
// (internal/core members.go) and carries out what they return: a join
// retried, a removal proposed (a member down for DownAfter while this node
// sees a live majority), memberlist joins to members that do not look alive
// (off the mutex), the members' gossip addresses kept for the next start.
// docs/membership.md has the rules and their bounds.
//
// Leases are measured on Config.Clock, by default CLOCK_BOOTTIME, which keeps
// counting while the machine is suspended; if wall time ever outruns it by
// more than Skew the node drops the delegations it holds (hazard H9 in
// docs/design.md).
//
// # Lifecycle
//
// Open bumps the node's incarnation before it sends anything, so a restarted
// home never re-issues a token. A new cluster starts with Bootstrap and the
// same InitialMembers on each initial node (and the others' gossip addresses
// in Join); a new node joins with Join; a restarted node does neither: it
// rejoins gossip at the addresses it kept. A join under a node ID that a live
// node with another store holds is refused (ErrDuplicateNodeID). A node that learns an epoch without itself
// (removed by mistake, or started again after it left) asks to join again,
// after a restart only once its restart gate has passed. Close is a
// controlled shutdown: it releases the delegations the node holds, hands the
// keys it is home for to their new homes as Leave does (unless it is the last
// member or another member looks down), answers their drain queries until
// their gates would have passed, and stops every goroutine it started; Close
// with a context already done is a kill.
//
// # Guarantees
//
// At no time do two nodes admit critical sections on one key (under the drift
// bound); tokens for a key only grow, across restarts and epochs; a lock call
// succeeds, times out with ErrTimeout, or fails with a named error, never
// hanging past its context. A paused process may still believe it holds a
// lock: the protected resource must check the token (fence.Guard does).
package homelock
