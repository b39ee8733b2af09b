package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	clustertest "github.com/homelock/homelock/cluster_test"
)

type simReport struct {
	Seeds          int            `json:"seeds"`
	FirstSeed      uint64         `json:"first_seed"`
	LastSeed       uint64         `json:"last_seed"`
	Stopped        string         `json:"stopped,omitempty"` // the signal that ended the run early
	Violations     int            `json:"violations"`
	SeedsPerSecond float64        `json:"seeds_per_second"`
	WallSeconds    float64        `json:"wall_seconds"`
	Faults         map[string]int `json:"faults"`
	FailingSeeds   []uint64       `json:"failing_seeds,omitempty"`
	Events         int64          `json:"events"`
	Admissions     int64          `json:"admissions"`
}

func runSim(args []string, stdout, stderr io.Writer) int {
	def := clustertest.DefaultSimConfig(1)
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 1000, "number of seeds to run, starting at --first")
	first := fs.Uint64("first", 1, "first seed")
	seed := fs.Uint64("seed", 0, "run only this seed (a replay)")
	nodes := fs.Int("nodes", 0, fmt.Sprintf("initial nodes, %d to %d (default: varies by seed)", clustertest.MinSimNodes, clustertest.MaxSimNodes))
	duration := fs.Duration("duration", clustertest.MinSimDuration, fmt.Sprintf("simulated time per seed, at least %v (faults in its first --fault-fraction)", clustertest.MinSimDuration))
	slowHooks := fs.Duration("slow-hooks", 0, fmt.Sprintf("every store hook takes this long, up to %v (default: up to 2ms); each handoff waits for two, so lengthen --duration with it", clustertest.MaxSlowHooks))
	lease := fs.Duration("lease", 0, fmt.Sprintf("the delegation lease asked for and the homes' MaxLease, %v to %v (default: 1s)", clustertest.MinSimLease, clustertest.MaxSimLease))
	faultFraction := fs.Float64("fault-fraction", def.FaultFraction, fmt.Sprintf("the share of --duration with faults, %v to %v, leaving at least %v healed", clustertest.MinSimFaultFraction, clustertest.MaxSimFaultFraction, clustertest.MinSimHealed))
	lockers := fs.Int("lockers", def.Lockers, fmt.Sprintf("concurrent workload lockers per node, 1 to %d", clustertest.MaxSimLockers))
	hotKeys := fs.Int("hot-keys", def.HotKeys, fmt.Sprintf("keys every node contends, 0 to %d", clustertest.MaxSimHotKeys))
	coldKeys := fs.Int("cold-keys", def.ColdKeys, fmt.Sprintf("keys locked now and then, 0 to %d (with 0, every lock takes a hot key)", clustertest.MaxSimColdKeys))
	wipes := fs.Bool("wipes", false, "add disk wipes to the random faults: a node crashes and starts again on an empty disk under its old ID (changes every seed's schedule)")
	trace := fs.Bool("trace", false, "print every event of the run (with --seed)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "seeds run in parallel")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the batch to this file (go tool pprof)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: homelock sim [--seeds N --first F | --seed S [--trace]] [flags]\n\nRuns the seeded protocol simulator: the machines production runs, on a\nvirtual network and clock with faults, judged by an independent checker.\nA failing seed is printed as it is found, with the command that replays\nit. SIGINT or SIGTERM stops handing out seeds: the running ones finish and\nthe report covers the seeds run (a second signal quits at once). Exit\nstatus: 0 no violation, 1 a violation, 2 bad flags, 130/143 stopped by\nSIGINT/SIGTERM without a violation. Flags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *nodes != 0 && (*nodes < clustertest.MinSimNodes || *nodes > clustertest.MaxSimNodes) {
		fmt.Fprintf(stderr, "homelock sim: --nodes must be %d to %d, got %d\n", clustertest.MinSimNodes, clustertest.MaxSimNodes, *nodes)
		return 2
	}
	if *duration < clustertest.MinSimDuration {
		fmt.Fprintf(stderr, "homelock sim: --duration must be at least %v, got %v\n", clustertest.MinSimDuration, *duration)
		return 2
	}
	if *slowHooks < 0 || *slowHooks > clustertest.MaxSlowHooks {
		fmt.Fprintf(stderr, "homelock sim: --slow-hooks must be 0 to %v, got %v\n", clustertest.MaxSlowHooks, *slowHooks)
		return 2
	}
	if *lease != 0 && (*lease < clustertest.MinSimLease || *lease > clustertest.MaxSimLease) {
		fmt.Fprintf(stderr, "homelock sim: --lease must be %v to %v, got %v\n", clustertest.MinSimLease, clustertest.MaxSimLease, *lease)
		return 2
	}
	if *faultFraction < clustertest.MinSimFaultFraction || *faultFraction > clustertest.MaxSimFaultFraction {
		fmt.Fprintf(stderr, "homelock sim: --fault-fraction must be %v to %v, got %v\n", clustertest.MinSimFaultFraction, clustertest.MaxSimFaultFraction, *faultFraction)
		return 2
	}
	if healed := *duration - time.Duration(float64(*duration)**faultFraction); healed < clustertest.MinSimHealed {
		fmt.Fprintf(stderr, "homelock sim: --duration %v with --fault-fraction %v leaves %v healed, less than %v: lengthen --duration\n", *duration, *faultFraction, healed, clustertest.MinSimHealed)
		return 2
	}
	if *lockers < 1 || *lockers > clustertest.MaxSimLockers {
		fmt.Fprintf(stderr, "homelock sim: --lockers must be 1 to %d, got %d\n", clustertest.MaxSimLockers, *lockers)
		return 2
	}
	if *hotKeys < 0 || *hotKeys > clustertest.MaxSimHotKeys || *coldKeys < 0 || *coldKeys > clustertest.MaxSimColdKeys || *hotKeys+*coldKeys == 0 {
		fmt.Fprintf(stderr, "homelock sim: --hot-keys must be 0 to %d and --cold-keys 0 to %d, not both 0; got %d and %d\n", clustertest.MaxSimHotKeys, clustertest.MaxSimColdKeys, *hotKeys, *coldKeys)
		return 2
	}
	config := func(s uint64) clustertest.SimConfig {
		c := clustertest.DefaultSimConfig(s)
		if *nodes != 0 {
			c.Nodes = *nodes
		}
		c.Duration, c.SlowHooks, c.Lease = *duration, *slowHooks, *lease
		c.FaultFraction, c.Lockers, c.HotKeys, c.ColdKeys = *faultFraction, *lockers, *hotKeys, *coldKeys
		c.Wipes = *wipes
		return c
	}
	if *seed != 0 {
		c := config(*seed)
		c.Trace = *trace
		r := clustertest.Run(c)
		if *trace {
			for _, l := range r.Trace {
				fmt.Fprintln(stdout, l)
			}
		}
		if r.Failed() {
			fmt.Fprint(stdout, r.Report())
			return 1
		}
		fmt.Fprintf(stdout, "seed %d: no violation (%d events, %d admissions, %d acknowledged writes)\n", *seed, r.Events, r.Admissions, r.Acks)
		return 0
	}

	// Schedules allocate fast and keep little alive: at the default GOGC the
	// collector takes a third of the run. Trading memory (about 100 MB per
	// worker) for it is right for a batch job; an explicit GOGC still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(clustertest.SimGCPercent)
	}

	// Progress goes to stderr, so --json still prints one object on stdout:
	// a bar on a terminal, a line a minute into a file or a pipe (a long
	// run's log), which the bar's redraws filled at 40 KB a minute.
	var bar *progressbar.ProgressBar
	var lines *progressLines
	if isTerminal(stderr) {
		bar = progressbar.NewOptions(*seeds, progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount(),
			progressbar.OptionSetDescription("seeds"), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionShowIts())
	} else {
		lines = &progressLines{w: stderr, total: *seeds, first: *first, every: time.Minute}
	}
	var (
		mu     sync.Mutex
		faults = map[string]int{}
		// events and admissions show how much each seed ran: a workload
		// that admits little checks little.
		events, admissions int64
		failing            []clustertest.Result
		next               atomic.Uint64
		wg                 sync.WaitGroup
	)
	next.Store(*first)
	last := *first + uint64(*seeds)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "homelock sim: --cpuprofile: %v\n", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	// A signal stops the handing out of seeds; the seeds running finish, so
	// the seeds run are the range from --first to the last handed out, and
	// the report covers exactly them.
	ctx, stop := onSignal(context.Background(), stderr, "homelock sim", "finishing the seeds that run, then the report")
	defer stop()
	start := time.Now()
	for w := 0; w < max(1, *workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				s := next.Add(1) - 1
				if s >= last {
					return
				}
				r := clustertest.Run(config(s))
				mu.Lock()
				events += int64(r.Events)
				admissions += int64(r.Admissions)
				for k, v := range r.Faults {
					if v > 0 {
						faults[k]++
					}
				}
				if r.Failed() {
					failing = append(failing, r)
					// At once, not only at the end: a long run shows its
					// failures while it goes on.
					fmt.Fprintf(stderr, "\nseed %d: %s (replay: %s)\n", s, r.Violations[0].Invariant, r.Replay())
				}
				if lines != nil {
					lines.seedDone(len(failing))
				}
				mu.Unlock()
				if bar != nil {
					_ = bar.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	ran := int(min(next.Load(), last) - *first)
	var sig signalled
	stopped := errors.As(context.Cause(ctx), &sig)
	if bar != nil {
		if stopped {
			_ = bar.Exit()
		} else {
			_ = bar.Finish()
		}
		fmt.Fprintln(stderr)
	}
	sort.Slice(failing, func(i, j int) bool { return failing[i].Seed < failing[j].Seed })
	rep := simReport{Seeds: ran, FirstSeed: *first, LastSeed: *first + uint64(ran) - 1, Violations: len(failing),
		SeedsPerSecond: float64(ran) / wall.Seconds(), WallSeconds: wall.Seconds(), Faults: faults,
		Events: events, Admissions: admissions}
	if stopped {
		rep.Stopped = sig.Signal.String()
	}
	for _, r := range failing {
		rep.FailingSeeds = append(rep.FailingSeeds, r.Seed)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "seeds run:        %d (%d to %d)\n", rep.Seeds, rep.FirstSeed, rep.LastSeed)
		if stopped {
			fmt.Fprintf(stdout, "stopped by:       %v, after %d of %d seeds\n", sig.Signal, ran, *seeds)
		}
		fmt.Fprintf(stdout, "violations:       %d\nseeds per second: %.1f\nwall time:        %v\n", rep.Violations, rep.SeedsPerSecond, wall.Round(time.Millisecond))
		if ran > 0 {
			fmt.Fprintf(stdout, "a seed ran:       %d events, %d admissions (mean)\n", events/int64(ran), admissions/int64(ran))
		}
		fmt.Fprintln(stdout, "schedules exercising each fault kind:")
		kinds := make([]string, 0, len(faults))
		for k := range faults {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			fmt.Fprintf(stdout, "  %-18s %d\n", k, faults[k])
		}
		if len(failing) > 0 {
			// Which invariants broke, with the seeds (the first few) that
			// replay each: a batch run says what to look at, not only the
			// first failure.
			bySeed := map[string][]uint64{}
			var names []string
			for _, r := range failing {
				inv := r.Violations[0].Invariant
				if bySeed[inv] == nil {
					names = append(names, inv)
				}
				bySeed[inv] = append(bySeed[inv], r.Seed)
			}
			fmt.Fprintln(stdout, "\nviolations by invariant (first of each seed):")
			for _, inv := range names {
				seeds := bySeed[inv]
				fmt.Fprintf(stdout, "  %-62s %d  seeds %v\n", inv, len(seeds), seeds[:min(len(seeds), 8)])
			}
			fmt.Fprint(stdout, "\n", failing[0].Report())
		}
	}
	switch {
	case len(failing) > 0:
		return 1
	case stopped:
		return 128 + int(sig.Signal)
	}
	return 0
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLines reports a run's progress as a line a minute (and one after
// its first seed), for a stderr that is not a terminal.
type progressLines struct {
	w           io.Writer
	total       int
	first       uint64
	every       time.Duration
	start, last time.Time
	done        int
}

func (p *progressLines) seedDone(violations int) {
	now := time.Now()
	if p.done == 0 {
		p.start = now
	}
	p.done++
	if p.done > 1 && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	rate := ""
	if d := now.Sub(p.start).Seconds(); p.done > 1 && d > 0 {
		rate = fmt.Sprintf(", %.1f seeds/s", float64(p.done-1)/d)
	}
	fmt.Fprintf(p.w, "homelock sim: %d of %d seeds from %d%s, %d violations\n", p.done, p.total, p.first, rate, violations)
}
