package clustertest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/homelock/homelock/msg"
)

// SimConfig configures one seeded simulation run.
type SimConfig struct {
	Seed uint64
	// Nodes is the initial member count (3 to 9, MaxSimNodes).
	Nodes int
	// Duration is the virtual run length, at least MinSimDuration. Faults
	// happen in the first FaultFraction of it; the rest is healed, so that
	// healing and progress can be checked.
	Duration      time.Duration
	FaultFraction float64
	// HotKeys are contended by every node; ColdKeys are locked now and then.
	// With no cold keys every workload lock takes a hot one.
	HotKeys, ColdKeys int
	// Lockers is the number of concurrent lockers per node.
	Lockers int
	// Versions, when set, gives each initial node its protocol version
	// (mixed-version schedules); the default is 1 for all.
	Versions []uint32
	// SlowHooks, when set, is how long every store hook takes (schedules
	// whose hooks outlast a delegation); otherwise up to 2ms.
	SlowHooks time.Duration
	// Lease, when set, replaces simLease as the delegation lease asked for
	// and the homes' MaxLease (schedules whose leases reach the liveness).
	Lease time.Duration
	// Wipes adds a kind to the random faults: a node crashes and starts
	// again on an empty disk under its old node ID, a new store to the
	// cluster (H17, H21, H25, H27). Off by default, so that the seeds
	// docs/testing.md reports keep their schedules.
	Wipes     bool
	Mutations Mutations
	// HealingUnderMutation keeps the healing checks (M1, M2) on in a run
	// with a mutation: for a membership rule, whose break is one of
	// liveness, not of safety.
	HealingUnderMutation bool
	// Trace keeps every event line (for replay); otherwise only the last ones.
	Trace bool
	// Script, when set, replaces the random fault schedule (hazard scenarios);
	// Filter, when set, drops the messages it returns false for until the heal.
	Script func(s *Sim)
	Filter func(from, to msg.NodeID, env msg.Envelope) bool
}

// Cluster sizes and run lengths the simulator supports. Below
// MinSimDuration the healed phase is shorter than the healing bound
// (healing.go) plus the progress checks' settling time, so a run could not
// tell a cluster that heals from one that does not.
const (
	MinSimNodes    = 3
	MaxSimNodes    = 9
	MinSimDuration = 20 * time.Second
	// MaxSlowHooks bounds SimConfig.SlowHooks for random schedules (twice
	// the lease). The checks' bounds grow with the hooks: L6 allows three
	// per handoff, and I5 requires progress only of locks started early
	// enough to be served after every other node's lockers, at two hooks a
	// handoff, so a short run on a large cluster checks little of I5:
	// lengthen Duration with the hooks.
	MaxSlowHooks = 2 * time.Second
	// MinSimLease and MaxSimLease bound SimConfig.Lease to what the runs
	// in docs/testing.md cover: three times MinUseful, up to just under the
	// epoch lease, which bounds every grant.
	MinSimLease = 3 * simMinUseful
	MaxSimLease = simEpochLease - 100*time.Millisecond
	// MinSimHealed is the shortest healed phase, Duration × (1 −
	// FaultFraction), a run may have: the default's (20s × 0.45). The
	// healing bound and the progress checks' settling time fill it.
	MinSimHealed = 9 * time.Second
	// MinSimFaultFraction and MaxSimFaultFraction bound FaultFraction for
	// random schedules: below, a schedule has hardly a fault; above, the
	// healed phase is a sliver of the run.
	MinSimFaultFraction = 0.1
	MaxSimFaultFraction = 0.9
	// MaxSimLockers, MaxSimHotKeys and MaxSimColdKeys bound the workload's
	// shape to what the runs in docs/testing.md cover.
	MaxSimLockers  = 8
	MaxSimHotKeys  = 16
	MaxSimColdKeys = 200
)

// SimGCPercent is the GOGC a batch of seeds runs best at: a seed's live
// heap is small and its garbage plenty, and 1600 keeps a worker's heap near
// 100 MB while the collector's share of a run falls from a fifth to a few
// percent. homelock sim and the seed tests set it.
const SimGCPercent = 1600

// DefaultSimConfig is the configuration `go test` and `homelock sim` use:
// the seed picks the cluster size, 3 to 9 nodes.
func DefaultSimConfig(seed uint64) SimConfig {
	return SimConfig{
		Seed:          seed,
		Nodes:         MinSimNodes + int(seed%(MaxSimNodes-MinSimNodes+1)),
		Duration:      MinSimDuration,
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
	// Config is the run's configuration, for the replay command.
	Config SimConfig
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
	fmt.Fprintf(&b, "replay: %s\n", r.Replay())
	if r.Config.Script == nil && r.Config.flags() == "" {
		fmt.Fprintf(&b, "    or: go test ./cluster_test -run TestSimSeeds -sim.seed=%d -v\n", r.Seed)
	}
	return b.String()
}

// Replay is the command that runs r's schedule again with every event
// printed: its seed and every field of its configuration that is not the
// seed's default. A scripted schedule is its test's to run.
func (r Result) Replay() string {
	if r.Config.Script != nil {
		return fmt.Sprintf("the test that scripts this schedule, seed %d", r.Seed)
	}
	return fmt.Sprintf("go run ./cmd/homelock sim --seed %d%s --trace", r.Seed, r.Config.flags())
}

// flags returns the homelock sim flags, beyond --seed, that rebuild c from
// its seed: one for each field that differs from DefaultSimConfig(c.Seed).
func (c SimConfig) flags() string {
	def := DefaultSimConfig(c.Seed)
	var flags string
	if c.Nodes != 0 && c.Nodes != def.Nodes {
		flags += fmt.Sprintf(" --nodes %d", c.Nodes)
	}
	if c.Duration != 0 && c.Duration != def.Duration {
		flags += fmt.Sprintf(" --duration %v", c.Duration)
	}
	if c.FaultFraction != 0 && c.FaultFraction != def.FaultFraction {
		flags += fmt.Sprintf(" --fault-fraction %v", c.FaultFraction)
	}
	if c.SlowHooks != 0 {
		flags += fmt.Sprintf(" --slow-hooks %v", c.SlowHooks)
	}
	if c.Lease != 0 {
		flags += fmt.Sprintf(" --lease %v", c.Lease)
	}
	if c.Lockers != def.Lockers {
		flags += fmt.Sprintf(" --lockers %d", c.Lockers)
	}
	if c.HotKeys != def.HotKeys {
		flags += fmt.Sprintf(" --hot-keys %d", c.HotKeys)
	}
	if c.ColdKeys != def.ColdKeys {
		flags += fmt.Sprintf(" --cold-keys %d", c.ColdKeys)
	}
	if c.Wipes {
		flags += " --wipes"
	}
	return flags
}

// Run executes one seeded schedule and checks every invariant as it goes.
func Run(cfg SimConfig) Result {
	s := newSim(cfg)
	defer s.harsh.guard.close()
	s.run()
	return s.result()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
