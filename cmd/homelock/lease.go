package main

import (
	"sync"
	"time"
)

// leaseDrift shrinks every validity the node reports, as the protocol's
// holder does (Config.MaxDrift's default): this process's clock may run
// slower than the node's.
const leaseDrift = 0.01

// clientLease is the lock's lease as `homelock lock` keeps it on its own
// clock. A node that is paused or cut off sends nothing, not even LOST, so
// the command must be stopped when the last validity the node reported runs
// out. Each validity counts from when its request left this process (the
// LockRequest, or a ping), never from its receipt: the node measured it
// later than that, so this deadline is never after the node's.
type clientLease struct {
	mu       sync.Mutex
	deadline time.Time
	next     uint64
	inFlight map[uint64]time.Time // ping -> when it was sent
}

func newClientLease() *clientLease { return &clientLease{inFlight: make(map[uint64]time.Time)} }

// extend moves the deadline to anchor + validFor (less drift) if that is
// later; a late answer to an old ping never shortens it.
func (l *clientLease) extend(anchor time.Time, validFor time.Duration) {
	if validFor <= 0 {
		return
	}
	d := anchor.Add(time.Duration(float64(validFor) * (1 - leaseDrift)))
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.After(l.deadline) {
		l.deadline = d
	}
}

// ping numbers a ping sent at now.
func (l *clientLease) ping(now time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.inFlight[l.next] = now
	return l.next
}

// answered takes a VALID event: validFor counts from when its ping was sent.
// Pings older than the one answered are dropped: answers come in order.
func (l *clientLease) answered(ping uint64, validFor time.Duration) {
	l.mu.Lock()
	sent, ok := l.inFlight[ping]
	for p := range l.inFlight {
		if p <= ping {
			delete(l.inFlight, p)
		}
	}
	l.mu.Unlock()
	if ok {
		l.extend(sent, validFor)
	}
}

// until is the current deadline (zero before the first validity).
func (l *clientLease) until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// pingEvery paces pings: several per validity, so that one lost or slow
// answer does not end a lease that the node still holds.
func pingEvery(validFor time.Duration) time.Duration {
	return min(max(validFor/5, 10*time.Millisecond), time.Second)
}
