//go:build race

package clustertest

// raceScale stretches the leases and gates of the real-cluster tests under
// the race detector. On a loaded two-core machine the race-instrumented
// process stalls now and then for a few hundred milliseconds: every node's
// timer fires late by the same amount at once, and a core.Tick whose median
// is about 30µs (one key, nothing to scan) is caught taking 400ms. Such a
// stall outlasts a 250ms delegation lease or much of a 600ms epoch lease, and
// the cluster fails as designed: a lease lost mid critical section
// (ErrLeaseExpired), liveness lost (ErrLockUnavailable), or a lease that ran
// out between a committed write and its Release, which hands the successor
// no barrier (freshness is promised after a clean handoff only), so
// porcupine sees a lost update. Three times the margin absorbs such stalls.
const raceScale = 3
