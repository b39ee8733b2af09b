// Command homelock runs homelock nodes and tools:
//
//   - node: one node of a cluster, serving the client API;
//   - lock: hold a lock while a command runs, like flock(1);
//   - status: the epoch, its members and a node's stats;
//   - harness: the measurement gate, a local 3-node cluster measured
//     against homelock's targets;
//   - sim: the seeded protocol simulator (replay one seed with --seed);
//   - soak: a local cluster locking for minutes under kills and clean
//     restarts, checked as it goes;
//   - version: the module version and the lock protocol version.
//
// # homelock lock
//
// "homelock lock [flags] NAME [flags] -- COMMAND [ARGS...]" starts COMMAND
// only once the lock NAME is held, with its fencing token in HOMELOCK_TOKEN,
// and releases the lock only after COMMAND has exited, and on Linux every
// process it started (the lock command is their subreaper;
// --release-at-exit, like flock -o, releases at COMMAND's exit). SIGINT,
// SIGTERM and SIGHUP are passed on to COMMAND (SIGKILL after --kill-after),
// except a Ctrl-C on the terminal, which COMMAND got from it (the
// supervisor tells the lock command of each SIGINT it got, so that a kill
// -INT of either alone is passed on); before
// COMMAND starts they end the wait. A lost lease (revoked, or run out on
// the lock command's own clock, which counts a suspend, because the node
// went silent) stops COMMAND and every process it started with SIGTERM,
// then SIGKILL, unless it ran out while the lock command did not run
// (Ctrl-Z, a suspend) and the node says the lock is still held. On Linux a
// SIGKILL to the lock command SIGKILLs COMMAND and every process it
// started, and the lock is held until they have exited (the process a user
// starts supervises the lock command proper; supervise_linux.go). --wait is kept on the lock command's
// own clock too, so a node that never answers costs --wait plus two
// RetryIntervals. --node may list several nodes: one that cannot grant the
// lock itself (unreachable, cut off, shutting down) gives way to the next.
//
// Exit status of homelock lock:
//
//	COMMAND's  the lock was held from before COMMAND started until after it exited
//	           (128+N if COMMAND was killed by signal N)
//	2          usage error: bad flag or argument, or --lease/--wait refused by the node
//	120        lock lost while COMMAND ran (lease ran out or revoked, or the node shut
//	           down, which keeps the lock until COMMAND exits): COMMAND was stopped
//	121        node unreachable: refused, or no answer within --wait
//	122        unavailable: no epoch liveness, not a member, mixed protocol versions,
//	           the key's home silent or in its gate when --wait ran out,
//	           too many delegations, node shutting down
//	123        not acquired in time: still queued behind a holder when --wait ran out
//	           (at once with --try)
//	126, 127   COMMAND could not be started, or was not found
//	128+N      homelock lock got signal N before COMMAND started (nothing ran)
//	1          any other failure of homelock lock itself
//
// Every subcommand exits 2 on a usage error and 0 for --help.
package main
