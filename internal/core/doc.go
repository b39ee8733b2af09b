// Package core composes one node's three pure state machines — epoch
// (agreement and liveness), home (the arbiter for the keys this node is home
// for) and delegation (the holder side) — into a single pure step function.
//
// The root package drives a core.Node with the real clock, transport and
// store; the simulator in cluster_test drives the very same Node with virtual
// time and a hostile network. Keeping the composition here, and nowhere else,
// is what makes the simulator test the code that runs in production.
//
//	         Receive / Tick / Lock / Unlock / Settled / Fresh
//	                             │
//	                 ┌───────────▼───────────┐
//	header checks ─► │  core.Node (routing)   │ ─► Ready{writes, msgs, events}
//	(incarnation,    │  epoch  home  holder   │
//	 epoch, version) └────────────────────────┘
//
// The loop a driver runs, in the manner of etcd raft's Ready:
//
//	rd := n.Receive(now, env) // or Tick, Lock, ...
//	store.Commit(rd.Acceptor, rd.Learned, rd.GatePassed) // synced, first
//	for _, m := range rd.Msgs { transport.Send(m.To, m.Env) }
//	for _, e := range rd.Events { deliver to lockers, run store hooks }
//	sleep until n.NextDeadline(), then n.ObserveClocks(wall, now, wall) and n.Tick(now)
//
// Messages a node addresses to itself (it is home for a key it locks) are
// delivered inside the same step: zero network messages.
//
// Membership decisions (members.go) are part of the same pure node: the
// failure detector's view is an input (Gossip), and Maintain returns in
// Ready the removals proposed, the joins and leaves sent (each asked again
// until an epoch answers it), the memberlist joins to make
// and the gossip addresses to keep; a Join under a live member's node ID
// with another store is refused before any machine sees it. A member that
// comes back at another address is reached at the address the newest epoch
// (or, asked to let it in, gossip) gives, and proposes its own new entry
// when no other member is alive to (H23). A peer in the view that
// advertises other safety timings than this node's fails cluster locks
// closed, as mixed protocol versions do (H26). A Join that would put an
// entry into the epoch waits until Config.Reaches says the joiner's
// advertised address reaches it, and so does a first start for every
// initial member (H28): the driver asks its transport, and the simulator,
// whose addresses always reach, sets none.
//
// The wall-clock jump rule (H9) is the core's too: on every step the
// driver reads the wall clock on both sides of the lease clock, and
// ObserveClocks decides whether wall time ran ahead by more than JumpAfter,
// added up across readings since any anchor still in use, so the
// simulator's suspends are judged by the code production runs.
//
// Hn names a hazard schedule, the reason for a rule: docs/design.md lists
// H1–H24 with the rule for each.
//
// Header rules applied before any machine sees a message:
//   - a message from an incarnation below one that reclaimed from us is
//     discarded (H1, H11);
//   - a request (Acquire, Renew, DrainQuery) from a node behind our epoch is
//     answered with Learn and nothing else happens (H8);
//   - a message from a node ahead of us makes us ask it for its epoch.
package core
