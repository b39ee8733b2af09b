package clustertest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/msg"
)

// SimConfig configures one seeded simulation run.
type SimConfig struct {
	Seed uint64
	// Nodes is the initial member count (3 to 5).
	Nodes int
	// Duration is the virtual run length. Faults happen in the first
	// FaultFraction of it; the rest is healed, so progress can be checked.
	Duration      time.Duration
	FaultFraction float64
	// HotKeys are contended by every node; ColdKeys are locked now and then.
	HotKeys, ColdKeys int
	// Lockers is the number of concurrent lockers per node.
	Lockers int
	// Versions, when set, gives each initial node its protocol version
	// (mixed-version schedules); the default is 1 for all.
	Versions  []uint32
	Mutations Mutations
	// Trace keeps every event line (for replay); otherwise only the last ones.
	Trace bool
	// Script, when set, replaces the random fault schedule (hazard scenarios);
	// Filter, when set, drops the messages it returns false for until the heal.
	Script func(s *Sim)
	Filter func(from, to msg.NodeID, env msg.Envelope) bool
}

// Mutations break one rule each, to show that the checkers catch the break.
type Mutations struct {
	Home   home.Mutations
	Holder delegation.Mutations
	// IncarnationNotPersisted restarts a node with its old incarnation.
	IncarnationNotPersisted bool
	// AcceptorNotPersisted drops acceptor records instead of storing them.
	AcceptorNotPersisted bool
	// LearnedNotPersisted drops learned epochs instead of storing them (H10).
	LearnedNotPersisted bool
}

// Any reports whether any mutation is on.
func (m Mutations) Any() bool { return m != Mutations{} }

// DefaultSimConfig is the configuration `go test` and `homelock sim` use.
func DefaultSimConfig(seed uint64) SimConfig {
	return SimConfig{
		Seed:          seed,
		Nodes:         3 + int(seed%3),
		Duration:      20 * time.Second,
		FaultFraction: 0.55,
		HotKeys:       2,
		ColdKeys:      12,
		Lockers:       2,
	}
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	Detail    string
	At        time.Duration
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %v: %s", v.Invariant, v.At, v.Detail)
}

// Result is what one run found.
type Result struct {
	Seed       uint64
	Violations []Violation
	// Faults counts the fault kinds this schedule exercised.
	Faults map[string]int
	// Admissions, Grants and Events are totals over the run.
	Admissions, Acks, Events int
	// TraceHash identifies the whole event sequence: same seed, same hash.
	TraceHash uint64
	// Trace holds the last events (all of them with SimConfig.Trace).
	Trace []string
	// HealedAfter is how long after the heal every node stood in one agreed
	// epoch, lockable and live (-1: never); Epochs is the highest epoch
	// learned, EpochBudget what the faults allowed (healing.go).
	HealedAfter time.Duration
	Epochs      uint64
	EpochBudget int
}

// Failed reports whether the run found a violation.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Report explains a failing run: the invariant, the last events and the
// command that replays it.
func (r Result) Report() string {
	var b strings.Builder
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION seed=%d: %s\n", r.Seed, v)
	}
	fmt.Fprintf(&b, "last events:\n")
	for _, l := range r.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "replay: go run ./cmd/homelock sim --seed %d --trace\n", r.Seed)
	fmt.Fprintf(&b, "    or: go test ./cluster_test -run TestSimSeeds -sim.seed=%d -v\n", r.Seed)
	return b.String()
}

// Run executes one seeded schedule and checks every invariant as it goes.
func Run(cfg SimConfig) Result {
	s := newSim(cfg)
	defer s.harsh.guard.close()
	s.run()
	return s.result()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
