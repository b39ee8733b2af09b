package simtest

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/msg"
)

// The invariants Agreement checks (docs/design.md, "Invariants").
const (
	// InvEpochFork: no two different epochs are learned for one number.
	InvEpochFork = "E1 epochs never fork"
	// InvEpochGrows: what a node syncs as learned only grows, restarts
	// included (a wiped disk starts over).
	InvEpochGrows = "E1 learned numbers only grow"
	// InvEpochCert: a learned epoch carries a certificate that proves it
	// against the epoch learned before it.
	InvEpochCert = "E1 certificates prove the epoch"
	// InvEpochLive: every liveness granted for epoch n ends by the first
	// true instant anyone learned n+1, plus EpochLease, plus what its node's
	// lease clock stalled unseen since the round, up to Agreement.Lag.
	InvEpochLive = "E2 liveness ends before a newer epoch's gate"
)

// Agreement checks epoch agreement from what nodes synced as learned and
// the liveness they granted, in true time. Every harness feeds it: epoch's
// simulator and schedules, the datadriven scripts and the cluster
// simulator. K names a node's disk (a wiped disk is Forgotten).
type Agreement[K comparable] struct {
	// Fail is called for every violation found.
	Fail func(inv, format string, args ...any)
	// EpochLease is the liveness bound of E2; zero leaves E2 unchecked.
	EpochLease time.Duration
	// Lag is how far a node's lease clock may stall before the node sees a
	// clock jump (H9, the jump threshold): a liveness held through a shorter
	// stall runs that much longer in true time, which the activation gate's
	// Skew covers (Live). Zero when clocks never stall.
	Lag time.Duration
	// Base is the origin of true time in messages.
	Base time.Time
	// ConfiguredZero: epoch 0 is each node's configured list, not agreed,
	// so two nodes may hold different ones.
	ConfiguredZero bool

	chosen  map[uint64]msg.Epoch
	digests map[uint64]uint64
	first   map[uint64]time.Time
	maxLive map[uint64]time.Time
	synced  map[K]uint64 // highest number synced, plus one (0: none)
}

func (a *Agreement[K]) init() {
	if a.chosen == nil {
		a.chosen = map[uint64]msg.Epoch{}
		a.digests = map[uint64]uint64{}
		a.first = map[uint64]time.Time{}
		a.maxLive = map[uint64]time.Time{}
		a.synced = map[K]uint64{}
	}
}

func (a *Agreement[K]) fail(inv, format string, args ...any) {
	if a.Fail != nil {
		a.Fail(inv, format, args...)
	}
}

// Learned records that node synced e as learned at true time at. verify,
// when given, checks e's certificate against the epoch chosen before it
// (nil when nobody learned that one).
func (a *Agreement[K]) Learned(node K, at time.Time, e msg.Epoch, verify func(prev *msg.Epoch) error) {
	a.init()
	num := e.Number
	if last := a.synced[node]; last > 0 && num <= last-1 {
		a.fail(InvEpochGrows, "%v learned epoch %d after %d", node, num, last-1)
	}
	a.synced[node] = num + 1
	if num == 0 && a.ConfiguredZero {
		return
	}
	d := e.Digest()
	if prev, ok := a.digests[num]; ok {
		if prev != d {
			a.fail(InvEpochFork, "%v learned epoch %d %v, which differs from %v learned before", node, num, Members(e), Members(a.chosen[num]))
		}
	} else {
		a.chosen[num], a.digests[num], a.first[num] = e, d, at
	}
	if verify != nil && num >= 1 {
		prev, ok := a.chosen[num-1]
		if !ok {
			a.fail(InvEpochCert, "%v learned epoch %d whose previous epoch nobody learned", node, num)
		} else if err := verify(&prev); err != nil {
			a.fail(InvEpochCert, "%v learned epoch %d with a bad certificate: %v", node, num, err)
		}
	}
	if num >= 1 {
		a.checkLive(num - 1)
	}
}

// Forget is a wiped disk: node's next learned epoch may be any.
func (a *Agreement[K]) Forget(node K) {
	a.init()
	delete(a.synced, node)
}

// Live records a liveness granted for epoch e that runs to true time until,
// through unseen stalls of its node's lease clock since the round was sent
// (suspends the node took no clock jump for). E2 allows the stalls, up to
// Lag, and nothing else: a liveness not shortened by the drift bound still
// fails it on a slow clock, and one held through a stall over Lag too.
func (a *Agreement[K]) Live(e uint64, until time.Time, unseen time.Duration) {
	a.init()
	until = until.Add(-min(unseen, a.Lag))
	if until.After(a.maxLive[e]) {
		a.maxLive[e] = until
		a.checkLive(e)
	}
}

func (a *Agreement[K]) checkLive(e uint64) {
	if a.EpochLease == 0 {
		return
	}
	fl, ok := a.first[e+1]
	x, held := a.maxLive[e]
	if bound := fl.Add(a.EpochLease); ok && held && x.After(bound.Add(time.Microsecond)) {
		a.fail(InvEpochLive, "liveness for epoch %d runs to %v (less unseen stalls), epoch %d learned at %v (+EpochLease = %v)",
			e, x.Sub(a.Base), e+1, fl.Sub(a.Base), bound.Sub(a.Base))
	}
}

// Highest is the highest epoch number anyone learned.
func (a *Agreement[K]) Highest() uint64 {
	var h uint64
	for n := range a.chosen {
		h = max(h, n)
	}
	return h
}

// Members names e's members with a short store ID, as traces print them.
func Members(e msg.Epoch) []string {
	ids := make([]string, 0, len(e.Members))
	for _, m := range e.Members {
		ids = append(ids, fmt.Sprintf("%s/%x", m.ID, m.Store&0xfff))
	}
	return ids
}
