package harness

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// Options are the harness's knobs.
type Options struct {
	// Duration is the length of each timed phase with many workers (hot
	// key, many keys); the short samples (repeat lock, store throughput)
	// take min(Duration, 1s).
	Duration time.Duration
	// Repeat is how many times each repeated phase runs; the report gives
	// the median and the spread.
	Repeat      int
	Nodes       int
	Keys        int
	Workers     int
	Delegations int
	// Parallel is the goroutines of the parallel repeat lock, each on its
	// own key.
	Parallel int
	// Dir is where the temporary data directory goes ("" : tmpfs if any).
	Dir string
	// Progress, if set, is told each phase as it starts.
	Progress func(phase string)
	// Profile, if set, is called as each measured phase starts and the
	// function it returns as the phase ends (per-phase CPU profiles).
	Profile func(phase string) (end func())
}

// DefaultOptions are `homelock harness` without flags.
func DefaultOptions() Options {
	return Options{Duration: 3 * time.Second, Repeat: 3, Nodes: 3, Keys: 64, Workers: 4, Delegations: 1_000_000, Parallel: 8}
}

// Validate says what is wrong with o, in the command's flag names.
func (o Options) Validate() error {
	if o.Nodes < 3 {
		return fmt.Errorf("--nodes must be at least 3, got %d", o.Nodes)
	}
	return positive(flagCheck{"--duration", o.Duration > 0}, flagCheck{"--repeat", o.Repeat > 0}, flagCheck{"--keys", o.Keys > 0},
		flagCheck{"--workers", o.Workers > 0}, flagCheck{"--parallel", o.Parallel > 0}, flagCheck{"--delegations", o.Delegations > 0})
}

// flagCheck is whether a flag's value is positive.
type flagCheck struct {
	name string
	ok   bool
}

// positive says which flag, the first, is not positive.
func positive(checks ...flagCheck) error {
	for _, f := range checks {
		if !f.ok {
			return fmt.Errorf("%s must be positive", f.name)
		}
	}
	return nil
}

// short is the length of the short samples.
func (o Options) short() time.Duration { return min(o.Duration, time.Second) }

// stage is when a phase runs: before the cluster starts, on it, or after it
// has closed.
type stage int

const (
	beforeCluster stage = iota
	onCluster
	afterCluster
)

// phase is one measured part of the run. Phases run in stage order; within
// a stage the repeated ones run in Repeat rounds (each round runs each of
// them once, so that a burst of load on a shared machine lands on one
// repetition of several phases rather than on every repetition of one), then
// the ones that run once, in list order.
type phase struct {
	name  string
	stage stage
	// once: the phase runs a single time (it is slow, or it consumes the
	// cluster: rehome kills a node).
	once bool
	// measures are what the phase records, in the report's order.
	measures []measure
	run      func(ctx context.Context, e *env) error
}

// env is what a phase works with.
type env struct {
	o  Options
	r  *Report
	wd *workDir
	c  *cluster // nil outside onCluster
	// round is the repetition under way, from 0.
	round int
}

// Run starts the cluster, measures everything, and removes its data: each
// phase's directory when the phase ends, and the run's directory however Run
// returns (a cancelled ctx ends the phase under way, closes the cluster and
// returns ctx's error). The report is summarised even when a phase fails.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	profile := o.Profile
	if profile == nil {
		profile = func(string) func() { return func() {} }
	}
	start := time.Now()
	wd, err := startWorkDir(o.Dir, progress)
	if err != nil {
		return nil, err
	}
	defer wd.remove()
	r := newReport()
	r.Machine = machine(wd.path)
	r.Settings = Settings{Duration: o.Duration.String(), Repeat: o.Repeat, Nodes: o.Nodes, Keys: o.Keys, Workers: o.Workers, Parallel: o.Parallel, Delegations: o.Delegations}
	phases := phaseList(o)
	e := &env{o: o, r: r, wd: wd}
	defer func() {
		if e.c != nil {
			e.c.close()
		}
	}()

	err = func() error {
		for _, st := range schedule(phases, o.Repeat) {
			if st.phase.stage == onCluster && e.c == nil {
				progress("starting the cluster")
				c, err := startCluster(ctx, wd.sub("cluster"), o.Nodes, nil)
				if err != nil {
					return err
				}
				e.c = c
				cfg := c.cfgs[0]
				r.Settings.EpochLease, r.Settings.MaxLease, r.Settings.DownAfter = cfg.EpochLease.String(), cfg.MaxLease.String(), cfg.DownAfter.String()
			}
			if st.phase.stage == afterCluster && e.c != nil {
				e.c.close()
				e.c = nil
				debug.FreeOSMemory()
			}
			name := st.phase.name
			if !st.phase.once && o.Repeat > 1 {
				name = fmt.Sprintf("%s (%d/%d)", name, st.round+1, o.Repeat)
			}
			progress(name)
			e.round = st.round
			end := profile(st.phase.name)
			err := st.phase.run(ctx, e)
			end()
			// What the phase freed goes back to the system, so that the
			// run's peak is its largest phase, not their sum.
			debug.FreeOSMemory()
			if err != nil {
				return fmt.Errorf("%s: %w", st.phase.name, err)
			}
		}
		return nil
	}()
	r.WallSeconds = time.Since(start).Seconds()
	r.finish(phases)
	return r, err
}

// step is one run of a phase.
type step struct {
	phase phase
	round int
}

// schedule orders the runs of phases: by stage; within a stage, repeat
// rounds of its repeated phases (in list order), then its phases that run
// once.
func schedule(phases []phase, repeat int) []step {
	var out []step
	for _, st := range []stage{beforeCluster, onCluster, afterCluster} {
		for round := range repeat {
			for _, p := range phases {
				if p.stage == st && !p.once {
					out = append(out, step{p, round})
				}
			}
		}
		for _, p := range phases {
			if p.stage == st && p.once {
				out = append(out, step{p, 0})
			}
		}
	}
	return out
}
