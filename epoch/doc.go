// Package epoch owns homelock's membership epochs: single-decree agreement
// on each epoch number (acceptor, proposer, learner), epoch liveness (renewal
// rounds answered by a majority), and the Ring that maps a key to its home.
//
// # The loop
//
// Machine is a pure state machine in the manner of etcd raft's RawNode: no
// I/O, no goroutines, no clock, randomness only from Config.Rand. The driver
// (the root package with the real clock, or the simulator with a virtual
// one) feeds it inputs and carries out the returned Output:
//
//	m := epoch.New(cfg, loadedState)        // or then m.Bootstrap(now, initial), once per cluster
//	for {
//		var out epoch.Output
//		select {
//		case env := <-inbox:                 // Prepare, Promise, ..., Join, Leave
//			out = m.Step(clock.Now(), env)
//		case <-timer(m.NextDeadline()):      // DueNow: at once; zero: no timer
//			out = m.Tick(clock.Now())
//		case mb := <-agreedDown:
//			out = m.ProposeRemove(clock.Now(), mb)
//		}
//		store.Sync(out.Acceptor, out.Learned) // 1. durable first
//		transport.Send(out.Msgs...)           // 2. then the messages
//		if out.NewEpoch { /* hand m.Current() to home and delegation */ }
//	}
//
// A home grants under the current epoch only while now < m.LiveUntil(). When
// the core finds the wall clock ahead of the lease clock (a jump, H9), it
// calls m.ClockJump(), which drops liveness at once.
//
// # Durability contract
//
// Every promise and acceptance change is in Output.Acceptor, every learned
// epoch (with its certificate) in Output.Learned, in the same Output as the
// messages that depend on them. The driver must sync both before sending any
// of Output.Msgs (an acceptor that forgot an acceptance lets two
// epochs live at once). The machine acts on an epoch (renewals, answers,
// proposals, Current) only from the step that returned it in Output.Learned
// (H10). New restores from exactly what was synced; liveness is volatile and
// starts at zero after a restart. A restored epoch is reported by Current
// with the zero learnedAt: the driver treats it as learned at start.
//
// # Invariants
//
// Hn names a hazard schedule, the reason for a rule: docs/design.md lists
// H1–H24 with the rule for each.
//
//   - E1 epochs never fork: no two different epochs are learned for one
//     number anywhere, and a node's learned number only grows. Epoch n+1 is
//     chosen by Paxos among the members (node ID and store ID, H17) of epoch
//     n; a certificate is Accepted replies for ONE ballot from a majority of
//     epoch n; a learner checks it against the epoch n it holds, or against
//     the certificate's Prev when it is further behind.
//   - E2 liveness ends before a newer epoch's gate: every liveness for epoch
//     n ends within EpochLease (true time) of the first moment anyone learns
//     n+1, plus what its lease clock lagged unseen (under the core's jump
//     threshold, H9). A round grants liveness only with ok answers from a majority of
//     epoch n to that one round (H7); ok means "has not promised n+1", also
//     for the node's own answer (H15); it runs from the round's send time,
//     shortened by MaxDrift. Learning a new epoch resets liveness to zero.
//   - Non-members run no rounds and get no ok (H14); a node without a
//     durable learned epoch, or whose store is not in it, is no acceptor
//     (H17). A member that sees a promise for n+1 and does not learn n+1
//     within PromiseTimeout completes the instance itself (H16). A Join under
//     a node ID already in the epoch replaces that entry (H21).
//   - A Join or Leave that may predate its sender's last change of
//     membership (by its header's epoch and the certificate's Prev) changes
//     nothing; the sender is sent the epoch and asks again
//     (docs/membership.md).
//
// Files: acceptor.go (promises, acceptances), proposer.go (ballots, wanted
// membership changes), learner.go (certificates), liveness.go (renewal
// rounds), ring.go (key to home), machine.go (the API and step plumbing).
package epoch
