// Package fence is homelock's resource side: fencing tokens, the signed grant
// that carries one to a resource, and the Guard that a protected resource uses
// as its sole acceptance point.
//
// It owns:
//
//   - Token: (epoch, incarnation, counter, section), ordered
//     lexicographically, with a 32-byte big-endian encoding whose byte order
//     is token order and a strict text form "e12.i3.c8842.s5". The first
//     three name a delegation, which the key's home grants and signs; the
//     section numbers the critical sections its holder admits under it, so
//     that every critical section has a token above every earlier one.
//   - Grant (lockGrant.v1) and its canonical encoding; KeyRing, which signs
//     grants with HMAC-SHA256 over the encoding's digest under its last active
//     key, verifies them with any key not retired, and refuses revoked issuer
//     epochs. A key listed before the signing one verifies without signing,
//     which is how a key changes across a running cluster (docs/operations.md).
//   - Guard: per resource, in Pebble under a prefix, the lock domain, the
//     highest fence accepted, the operation root for it, the last segment, and
//     a receipt per accepted segment, all written in the business write's batch;
//     the resource's mode (shadow or enforce); and the answer to "did my
//     write happen?" after a lost acknowledgement (Reconcile).
//
// A lease only grants permission to attempt a write: a paused owner still
// believes it holds the lock. The resource decides, by refusing every token
// lower than one it has accepted.
//
// # Using a Guard
//
// A store that protects a resource routes every write to it through Apply and
// stages the business change inside it, so the change commits in the same
// synced batch as the fence:
//
//	g, err := fence.NewGuard(db, ring, fence.GuardOptions{Prefix: []byte("\x00fence/"), Domain: clusterID})
//	...
//	rc, err := g.Apply(ctx, fence.Mutation{
//		Signed:    grant,          // from the lock handle
//		Resource:  "invoice-batch/2026-07-19",
//		Owner:     callerNodeID,   // the authenticated caller, not read from the grant
//		Operation: "settle",
//		OpID:      "settle-7781",
//		Section:   handle.Token().Section,
//		Segment:   1,
//		Payload:   row,
//	}, func(b *pebble.Batch) error {
//		return b.Set([]byte("invoices/2026-07-19"), row, nil)
//	})
//	switch {
//	case err == nil:                           // committed; rc is the receipt
//	case errors.Is(err, fence.ErrStaleOwner):  // a newer owner wrote; stop
//	}
//
// A replica applying a stream of writes to distinct resources can hand a run
// of them to ApplyBatch: each is judged exactly as Apply would judge it
// alone, and the accepted ones commit in one synced batch, so the run pays
// for one sync instead of one each.
//
// After a lost acknowledgement the writer asks Receipt(resource, opID) before
// doing anything else, and a worker taking over asks Reconcile (see Unknown
// outcomes); a long job writes segments 1, 2, 3... under one token.
//
// # Sections and the signed grant
//
// The grant is signed by the home for the delegation (e, i, c); the Guard
// fences with that token and Mutation.Section, which the grant does not
// cover. A section's token cannot be signed without a message to the home
// per critical section, which is what delegation avoids, and the holder
// node has no key of the home's. Nothing is lost by it: the section orders
// writers that share the one grant, all of them the node the grant names
// (Owner is checked against the caller), and that node could already write
// under its grant with any segment. What the section adds is that a paused
// earlier critical section of the same node, presenting its own lower
// section, is refused as a stale owner like any other. Across delegations
// the signed part decides: every section of a later delegation is above
// every section of an earlier one.
//
// # What a write costs
//
// On the hit path Apply reads nothing from Pebble: it keeps each resource's
// records in a bounded write-through cache (GuardOptions.CacheResources),
// and proves a new operation ID unused (F7) with a Bloom filter over the
// operation index (GuardOptions.OpIndexBytes), which NewGuard fills from the
// index, so that after a crash it holds exactly what survived. The Guard
// remembers grants it verified, by their exact bytes and key ring
// generation, so segments under one grant pay for one MAC. What is left is
// the payload's SHA-256, the receipt and the operation index entry in the
// batch, and the commit. The resource's state record is rewritten only by
// the first two writes through a cache entry (exact, then a floor that the
// receipts carry on): a hot resource's position lives in its receipts.
//
// A miss costs two point reads: a resource not in the cache, or an
// operation ID the filter cannot rule out (past its design load, more of
// them: Prune rebuilds the filter once much of it is pruned, and
// GuardStats.OpFilterLoad shows how full it is), and for a resource whose
// stored state is a floor, a seek to its last receipt. The second is a
// lookup of a key that is not there: configure Bloom filters on every
// level of the Pebble the Guard shares (UseBloomFilters
// does it), or that lookup reads a block of every sstable.
//
// A store that this Guard wrote through its cache holds floor state records
// (version 3), which a Guard of an earlier release refuses as corrupt: such
// a downgrade fails closed, refusing the resource's writes, rather than
// trusting a highest fence that lags. A pruned resource's state records
// (versions 4 and 5) are refused likewise, rather than answering "no
// receipt" for a pruned operation.
//
// # Rolling out: shadow, then enforce
//
// A resource is in one of two modes. In ModeEnforce a mutation that fails a
// rule is refused. In ModeShadow every rule is checked the same way, but a
// mutation that fails one is committed anyway, counted by its Reason
// (ResourceInfo.WouldRefuse, GuardStats) and logged (WouldRefuse), and the
// fence state is left exactly as an enforcing Guard that refused it would
// leave it: so the day the resource is enforced, it judges every mutation as
// if the shadow commits had never come. A rollout starts with
// GuardOptions.DefaultMode shadow, watches the would-refuse counts, enforces
// one low-risk resource (SetMode), widens, and ends with the default enforce.
//
// There is no way back. SetMode refuses to move an enforced resource to any
// other mode, and NewGuard refuses a shadow default on a store whose default
// was enforce (ErrEnforced). Shadow to enforce is a synced write that records
// when it happened (ResourceInfo.EnforcedAt). A rollback may change the lock
// client; it never turns the resource's validation off.
//
// # Unknown outcomes
//
// A write that times out and whose lease then runs out has an unknown
// outcome: it may have committed, it may still be in flight, it may be lost.
// The worker that takes over with a new fence recovers in this order:
//
//  1. Fence. Write under the new grant first, a fence-only Apply (stage nil,
//     segment 1) if there is nothing else to write. From then on the
//     resource refuses every copy of the old owner's writes still in flight.
//  2. Reconcile each operation the old owner may have left unknown, with
//     the fence it was sent under: OutcomeAccepted carries its receipt (reuse
//     the result, do not redo it); OutcomeRefused proves it did not happen and
//     never will (redo it, under the new fence, with the same operation ID);
//     OutcomeNeverSeen means step 1 did not happen, or the resource is in
//     shadow mode, where nothing proves a write absent: there only a
//     domain-specific check can decide.
//
// Asking before fencing can only answer Accepted or NeverSeen: until a
// higher fence is accepted, the old write may still arrive and be accepted.
//
// # Pruning receipts
//
// The Guard keeps a receipt and an operation index entry for every accepted
// mutation, about 110 bytes a write, until Prune(resource, below) deletes
// those under fences below below. Pruning gives up answers, not fences: the
// highest fence, segment order and replays of the current fence stand, so a
// stale owner is refused as before. Receipt and Reconcile answer ErrPruned,
// never "no receipt" or Refused, for an operation they cannot rule out was
// accepted under a pruned fence, and an operation ID whose receipt was
// pruned is accepted again under a new fence (F7 holds for the receipts
// kept). So prune below a fence only once nothing will resend or ask about an
// operation sent under a lower one: for example, a while after every worker
// that took the resource over under a later fence has reconciled.
//
// # Acceptance rules
//
// In order; the first that fails refuses the mutation (on an enforced
// resource; a shadow-mode resource commits it and counts the rule):
//
//  1. Bounds: every field and the payload within its bound (ErrTooLarge).
//  2. Authenticity: the grant's MAC verifies under an active key and its issuer
//     epoch is not revoked (ErrBadGrant, ErrRevoked).
//  3. Binding: the grant names exactly the mutation's resource, owner and
//     operation (ErrBadGrant).
//  4. Domain: the grant comes from the resource's lock domain and scope; a
//     Guard configured with a cluster domain refuses node-scope grants
//     (ErrForeignDomain). After Migrate, the new domain's tokens must exceed
//     the old highest fence (ErrMigrationPending).
//  5. Fence: the token is the grant's with Mutation.Section; a token below
//     the highest is ErrStaleOwner, or ErrFenceRegression
//     if the resource has receipts under that very token from another grant. A
//     token equal to the highest under another grant is ErrFenceRegression.
//  6. Segment: a higher token must start at segment 1; an equal token must carry
//     the next segment (ErrSegmentOrder). An already accepted segment resent
//     with the same operation ID and payload returns its original receipt; with
//     anything else it is quarantined (ErrQuarantined).
//  7. Operation: an operation ID with a receipt is not accepted again
//     (ErrDuplicateOp).
//
// # Regression versus stale owner
//
// Both are tokens the resource refuses; the distinction tells an operator
// whether the lock service lost state. A Guard cannot know every token an
// issuer minted, only the ones it accepted, so it calls a refusal a regression
// only when it has proof: the same token accepted before under a different
// grant (a different operation root). An issuer restored from an old snapshot
// re-mints tokens it had issued; the first one that reaches a resource which
// saw the original is caught. A token the Guard never saw is a plain stale
// owner: a legitimate old grant arriving late looks exactly the same.
//
// # Invariants
//
//   - F1 tokens only grow: a resource's highest fence never decreases. Nothing
//     resets it: not a refusal, not Bind, not Migrate, not a restart.
//   - F2 a failed check changes nothing: a refused Apply writes no fence state,
//     no receipt and no business data. The one record a refusal may write is
//     the quarantine log entry of a conflicting segment, which no check reads.
//     In shadow mode a failed check commits the business data with a
//     would-refuse record, and still writes no fence state and no receipt.
//   - F3 only authentic, bound grants are accepted: MAC under an active key,
//     issuer epoch not revoked, resource, owner and operation equal.
//   - F4 one resource, one lock domain: every accepted grant for a resource
//     comes from its bound domain and scope; a migration continues above the
//     highest fence.
//   - F5 segments in order: a new fence starts at segment 1; an equal fence
//     accepts only the next segment, under the same operation root.
//   - F6 atomic with the business write: fence state, receipt and business
//     change are in one synced batch; after a crash, all or none.
//   - F7 at most once per operation: an operation ID has at most one receipt
//     per resource, and a resend gets that receipt, never a second effect;
//     after Prune, for the receipts it kept.
package fence
