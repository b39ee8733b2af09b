// Package home is the arbiter for the keys this node is home for: the
// delegation table, FIFO waiters, grants, recalls, expiry, the restart gate
// and reclaim, and handoff when the epoch moves a key to another home.
//
// It is a pure state machine, like epoch and delegation: no goroutines, no
// I/O, no clock. Each input (Acquire, Release, Renew, Withdraw, DrainQuery,
// Drained, GateRemaining, ReclaimAnswer, OnEpoch, SetLiveness, Tick) takes the
// current time; what must happen comes back from Ready as messages to send
// and gate-passed markers to sync first. internal/core routes messages to it
// and is its only driver.
//
// # The loop of one key
//
//	Acquire ─► gated? liveness? ─► free ─► Grant (token = epoch.incarnation.counter)
//	              │                 held ─► queue (FIFO) + Recall once
//	              └─► queue, answer Wait{gate|liveness}; a gated moved key
//	                  pulls DrainQuery from its previous home
//	Release(exact token) ─► free ─► grant the oldest waiter, barrier handed on
//	expiry on the home's longer clock ─► free, counted as an expired hold
//
// # Invariants
//
// Hn names a hazard schedule, the reason for a rule: docs/design.md lists
// H1–H24 with the rule for each.
//
//   - D1 at most one live delegation per key; a home never forgets one before
//     its expiry (caps refuse new requests, nothing is evicted).
//   - D2 tokens a home grants for a key only grow: the counter only grows
//     within an incarnation, incarnations grow across restarts, epochs across
//     homes (F1 in fence).
//   - D3 a delegation never outlives the home's epoch liveness, nor does the
//     home's record of it: the lease is clamped so that lease + Skew ends
//     within the liveness, which is what lets a new epoch's activation gate
//     bound every delegation of the old one, even when the home's lease
//     clock lags unseen (H9).
//   - G1 every key a home serves in epoch e passes its activation gate
//     (learnedAt(e) + EpochLease + Skew, carried across epochs by continuity,
//     H4) before its first grant, unless a valid Drained from its previous
//     home waived the term; the restart gate is never waived by Drained (H13).
//   - G2 a home vouches Drained only for a key it served in the previous epoch
//     with its gate passed, no longer grants, and holds no live delegation
//     for but the one it hands over in it (H5, H12, H19).
//   - G3 a new home takes a handed-over delegation (Drained.Live) only while
//     its move-in gate for the key still runs, with an expiry later than the
//     old home's (receipt + remaining + Skew), and answers no request with
//     it: it never sends a Grant for a delegation it did not mint (H24). A
//     record of its own for the key is extended (the same token) or
//     replaced (an older one), never left to end first. A
//     Renew for a token it does not know, of a key whose move-in gate runs,
//     asks the old home (DrainQuery) instead of refusing.
//   - R1 a restarted home gates everything until start + EpochLease + Skew
//     unless its current epoch's gate-passed marker was synced and every
//     member answered its reclaim (H2, H3); reclaimed delegations are adopted.
//   - D4 held while alive: a delegation is renewed, waiters or not, while
//     its key is still ours and its holder a member of the epoch (H14),
//     each time up to MaxLease and never past the home's liveness (D3). A
//     holder renews a recalled delegation only while the critical section
//     that was running goes on, so waiters get the key as soon as it ends,
//     or once its lease runs out if the holder dies or goes silent. A
//     renewal of a recalled delegation repeats the Recall, so one lost
//     Recall cannot let the holder admit new sections ahead of the waiters.
//   - Fairness: waiters are granted oldest first; a recalled holder queues
//     behind those already waiting (a Queued request hears no
//     Wait{holder}); a grant made while
//     others wait is marked contended, so its holder admits one critical
//     section and drains. A refused requester (and a waiter the current
//     epoch no longer admits, which is refused) leaves the queue: what it
//     asks next queues anew.
package home
