// Package clustertest proves homelock the way each layer fails.
//
// The simulator (sim.go and its neighbours) drives 3 to 9 nodes (the seed
// picks how many; SimConfig.Nodes, homelock sim --nodes) of the real pure
// state machines, composed by internal/core exactly as production composes
// them, for SimConfig.Duration (20s by default, homelock sim --duration) of
// virtual time, with one seeded RNG that decides every delay, drop,
// duplicate, partition, crash, pause, clock rate, membership change and
// workload step. A run is a pure function of its seed: same seed, same trace
// hash. Each node has a disk that keeps only what a Ready asked to sync, so a
// crash loses exactly the volatile state.
//
// Checked at every step, by name (docs/design.md, "Invariants"):
//
//   - I1 exclusion: no critical section is admitted on a key while another
//     one's lease is still valid on its holder's clock (in true time);
//   - I2 tokens increase: every fresh Grant for a key is above all earlier
//     ones, and every admission's token (a token per critical section) is
//     above every earlier admission's;
//   - I3/I4 a fenced register (reads and writes carry the token) with a store
//     that refuses commits under an expired handle: the final value equals
//     the acknowledged increments, and porcupine finds the history of
//     increments linearizable;
//   - I5 nothing hangs past its deadline, and after the faults heal every
//     lock succeeds and every contender is admitted;
//   - E1 no two different epochs are learned for one number;
//   - fairness: a home grants the request that has queued longest;
//   - L6 held while alive: once the cluster settled, a critical section
//     without a lease of its own is never revoked (the workload runs some
//     of 1 to 1.6 leases on their own key, while others wait); a section
//     that ends with other nodes' lockers waiting is followed by an
//     admission within 8 retry intervals and three store hooks (hooks take
//     up to 2ms, or SimConfig.SlowHooks), if one of those lockers' deadline
//     falls after that; a crashed holder's section is
//     waited out by every other node until it starts again;
//   - L7 once healed, a holder asks to renew a delegation in use at half
//     its lease, not later. I2's grants and L7's renewals are checked as the
//     core hands each message on, to its own node included (the core answers
//     those within the step; they never show in Ready.Msgs).
//   - G3/G4 in one seed in eight, every section's write goes through a
//     fence.Guard on Pebble on a crashable MemFS, valid handle or not, with
//     the signed grant the holder handed the section; the store crashes
//     and drops unsynced data: the Guard never accepts a token not above
//     one it acknowledged, and every acknowledged write and receipt
//     survives (guardsim.go);
//   - G6 in the same seeds, writes sometimes send an earlier acknowledged
//     write's operation ID again and the store prunes between crashes: the
//     Guard refuses the ID while its receipt is kept and takes it as new once
//     pruned (guardsim.go);
//   - G5 the homes sign their grants as production's do, and every
//     section's signed grant verifies and names its own key, node and
//     delegation, a re-sent Grant's signed again included (signing.go);
//   - M1 membership heals: after the last fault every node is a member of
//     one agreed epoch, lockable and live, within a stated bound; M2 the
//     epochs learned stay within each fault's budget (healing.go);
//   - W1 the workload itself ran: every node running at the end had a
//     locker at the heal or started one since (a restarted process gets
//     its lockers back, as a restarted server gets its clients back).
//
// Besides the broad faults (crashes, pauses, partitions, a lossy network,
// joins, leaves, SIGTERMs that run Close's handoff and linger before the
// process ends and starts again, upgrades, proposal duels, restarts at
// another address with seeds given by name), harsh.go aims at single
// rules: clock rates exactly at the drift bound, suspends the lease clock
// misses (the core judges the jump on resume) and suspends it counts (messages before the
// first tick), delays of seconds, old messages across restarts in both
// directions, epoch changes in quick succession over the gates, a cut-off
// minority busy on its own keys until its liveness ends, and acquires
// timed at lease and liveness expiry instants.
//
// Membership is decided by the production code (internal/core members.go)
// over a model of memberlist (gossip.go): the simulator carries out the
// joins the core asks for and makes no membership decision of its own.
//
// A failing run prints the invariant, the last events and the command that
// replays it (`go run ./cmd/homelock sim --seed S --trace`). mutation_test.go
// switches single rules off and shows each is caught.
//
// Beside the simulator, the real code: clusters of nodes on loopback in
// this process (realcluster_test.go and its neighbours), `homelock node`
// and `homelock lock` as processes (process_test.go, lockcmd_test.go), and,
// with the docker build tag, three node containers with addresses of their
// own, cut off, paused, killed and restarted one fault at a time
// (docker_test.go) and in a seeded stream of faults, overlapping ones
// included, under load from `homelock lock` (docker_chaos_test.go).
package clustertest
