// Package lockcheck is the independent checker of the lock protocol, shared
// by the cluster simulator (cluster_test, `homelock sim`) and the datadriven
// scripts of internal/core.
//
// It re-derives truth from what each process sent and acted on (the
// core.Config.Observe hook), the true time, the clocks and the configured
// bounds, never from a machine's own state: each delegation's validity at
// its holder (the echoed attempt's send + lease − drift, on the holder's
// clock) and at its homes (its Grant's or last renewal's send + lease +
// Skew on the granting node, replaced by the adoption of a restarted
// incarnation, and on any home it was handed over to), the home's epoch
// liveness from the renewal rounds it sent and the answers it heard, and the
// epochs learned. From those it checks
//
//   - D1: at no instant are two delegations for one key valid at their
//     holders; D2: a holder admits only within its derived lease; D3: no
//     new admission after a Recall, but one on a delegation that had
//     admitted nothing (its Recall overtook its Grant or came before its
//     first admission) and one under a contended Grant; D4: no grant while another delegation
//     may be live as its home sees it; D5: a holder expires before its home;
//   - L1: no lease past the home's liveness; L2: epoch n's delegations end
//     within EpochLease + Skew of the first learn of n+1;
//   - B1: barriers handed on never go backwards; E3: certificates name a
//     majority that accepted; FIFO by the order the home received Acquires;
//     V1: no admission in an epoch of mixed versions; H22: a grant echoes
//     the last attempt its home heard.
//
// A harness implements Node for its nodes, gives World its clock, bounds
// and failure sink, and calls Observe (per message), Step (per applied
// Ready), Synced, Wrote and ClockJumped as its driver acts.
package lockcheck
