// Package simtest is the one test harness kit every simulation of homelock
// is built from, as raft's rafttest is for raft: a node's drifting clock, the
// time-ordered event queue, the faulty links of a seeded network, a
// hand-driven mailbox for scripted schedules, the disk model (what survives a
// crash is what a step asked to sync) and the agreement checker.
//
// Its users are epoch's seeded simulator and fixed schedules, the datadriven
// scripts of internal/core and the cluster simulator in cluster_test (the one
// `homelock sim` runs). Each keeps only what is its own: the machines it
// drives and the faults it schedules. Because they share these pieces, a
// clock that converts differently, a crash that keeps an unsynced record or
// an agreement check that one harness forgot cannot hide in one of them.
//
// The package depends on msg alone, so that epoch's own tests can use it:
// the disk model is generic over the acceptor and learned records, and
// certificate verification is handed in by the caller.
package simtest
