// Command homelock runs homelock nodes and tools:
//
//   - node: one node of a cluster, serving the client API;
//   - lock: hold a lock while a command runs, like flock(1), stopping the
//     command when the lease ends (even if the node goes silent);
//   - status: the epoch, its members and a node's stats;
//   - harness: the measurement gate, a local 3-node cluster measured
//     against homelock's targets;
//   - sim: the seeded protocol simulator (replay one seed with --seed).
package main
