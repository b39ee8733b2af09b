// Package delegation is the holder side: the delegations this node holds,
// local FIFO admission per key, the holder-first lease clock, renew, drain on
// recall, release with the store's freshness barrier, and the requests that
// ask homes for delegations.
//
// It is a pure state machine: no goroutines, no I/O, no clock. Local calls
// (TryAdmit, Lock, Unlock, Cancel, Settled, Fresh) and messages (Grant, Wait,
// NotHome, Refused, Recall, RenewReply, Reclaim) take the current time; Ready
// returns messages and Events for the driver: Admitted, Extended, Revoked and
// Failed for lockers, Settle and WaitFresh for the store's hooks, which run
// off the driver's lock and report back tagged with (key, token).
//
// # One key at a holder
//
//	idle ─Lock─► requested ─Grant─► held ─Recall / contended / lapse─► drain
//	              │ resend every RetryInterval        │ renew while in use
//	              └ Refused / deadline ─► Failed      └ expiry ─► Revoked
//	recalled: admit nothing new; a running section renews on ─► ends ─► drain
//	drain: admitted nothing ─► Release(inherited barrier)
//	       admitted ─► Settle hook ─► Release(store's barrier)
//
// While this node holds a key's delegation, Lock and Unlock are a local mutex:
// TryAdmit admits with zero messages and no allocation.
//
// The keys are split into shards (Config.Shards, ShardOf). TryAdmit and
// TryUnlockIn touch only their key's shard, so a driver runs them for keys of
// different shards on different cores, each under its shard's lock, while
// every other call holds all the shards' locks. The count decides nothing:
// it changes only the order in which one Tick serves keys due at the same
// instant.
//
// # Invariants
//
// Hn names a hazard schedule, the reason for a rule: docs/design.md lists
// H1–H24 with the rule for each.
//
//   - L1 holder first: a lease is anchored at the send of the attempt its reply
//     echoes (never at receipt) and shortened by the drift bound, while the
//     home anchors at its grant and lengthens by Skew, so the holder's lease
//     ends first in true time (H6, H22).
//   - L2 one outstanding Acquire per key; request IDs (incarnation, sequence)
//     only grow, across restarts too; a Grant that answers no outstanding
//     request, arrives too late, or was recalled before it arrived is released
//     unused: a lost or late reply never makes a second holder. A duplicate
//     of the delegation last held is answered as its end was: its Release
//     again, with the barrier it went back with, or nothing if it was lost
//     (expired, clock jump), which the home waits out.
//   - L3 no critical section is admitted on a recalled delegation (but one: a
//     holder recalled after its Grant came and before it admitted anything
//     admits its head locker once, the contended grant's one turn), on one with
//     less than MinUseful left, or while a renewal's outcome is unknown near
//     expiry (OWNERSHIP_UNKNOWN); a critical section's own lease never exceeds
//     the delegation's, and runs out as Revoked.
//   - L4 barriers never go backwards: a holder that admitted nothing passes on
//     the barrier it inherited (H18); a hook completion for another token is
//     dropped and a failed hook sends no Release (H20).
//   - L5 a clock jump drops every held delegation at once, and a Grant
//     answering an attempt sent before it is given back unused (H9).
//   - L6 held while alive: a running critical section renews its delegation
//     at half the lease, recalled or contended or not, until it ends (and so
//     does a head locker waiting for a one-shot grant's turn, its wait-fresh
//     hook running past half the lease); only
//     its own lease (WithLease), a refused renewal (this node left the
//     epoch, or the key moved and its new home could not take the
//     delegation over) or a silent home end it early. Once the key's home
//     in the newest epoch is not the one that issued the delegation,
//     renewals go to the new home, and the first it answers makes it the
//     issuer (renewals, Release, reclaim); a Release before that goes to
//     both. A recalled delegation admits nothing new (but its head locker
//     once if it admitted nothing yet, its Recall overtaking its Grant or
//     not, as under a contended Grant): local lockers queue and ask the
//     home again, behind the remote waiters, once it drains: that Acquire,
//     sent in the same step as the Release, says Queued and no Wait
//     answers it (docs/design.md, "The hot-key handoff").
//   - L7 every admission schedules the renewal at half the delegation's
//     lease (an idle delegation's own wake-up is its lapse release, too late
//     for a section admitted on it), so a section never depends on a
//     renewal sent in the last 2 × MinUseful.
package delegation
