package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/homelock/homelock/internal/harness"
)

// runSoak is the long run on a real local cluster: contended locks, kills
// and clean restarts one node at a time, and the checks of what a lock
// promises.
func runSoak(args []string, stdout, stderr io.Writer) int {
	o := harness.DefaultSoakOptions()
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the workers lock; no fault starts after it, and one under way runs on to its heal")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "nodes in the local cluster (at least 3)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "workers per node, each locking a random key and incrementing its counter")
	fs.IntVar(&o.Keys, "keys", o.Keys, "keys the workers contend for")
	fs.DurationVar(&o.FaultEvery, "fault-every", o.FaultEvery, "mean pause between one fault's heal and the next fault")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "picks the faults, their nodes and how long each node stays down")
	fs.StringVar(&o.Dir, "dir", "", "where to put the temporary data directory (default: /dev/shm if present, else the system temp dir)")
	asJSON := fs.Bool("json", false, "print the JSON report to stdout instead of the summary")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: homelock soak [flags]

Runs a local cluster (real gRPC on loopback, real Pebble and memberlist, the
example replicated store beside each node) for --duration, with workers on
every node contending for a few keys, and kills (or cleanly restarts) one
node at a time, each down for up to twice DownAfter. It checks, through the
public API: no two valid handles for one key at once, tokens that only grow,
every acknowledged increment on every replica (nothing lost or doubled), no
stale write at a store's Guard, and after each restart every node locking a
key of every home within DownAfter + EpochLease + Skew + 10s.

Exit status: 0 no violation, 1 a violation or the run failed, 2 bad flags,
130/143 stopped by SIGINT/SIGTERM (the cluster is closed and its data
removed). Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "homelock soak: %v\n", err)
		return exitUsage
	}
	ctx, stop := onSignal(context.Background(), stderr, "homelock soak", "closing the cluster")
	defer stop()
	start := time.Now()
	o.Progress = func(event string) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), event)
	}
	r, err := harness.Soak(ctx, o)
	if code, ok := stoppedCluster(ctx, stderr, "homelock soak"); ok {
		return code
	}
	if err != nil {
		fmt.Fprintf(stderr, "homelock soak: %v\n", err)
		return exitFailed
	}
	if *asJSON {
		js, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(stdout, "%s\n", js)
	} else {
		writeSoakSummary(stdout, r)
	}
	if len(r.Violations) > 0 {
		return exitFailed
	}
	return 0
}

func writeSoakSummary(w io.Writer, r *harness.SoakReport) {
	fmt.Fprintf(w, "soak: %.0f s, %d sections acknowledged, %d refused after their lock ended\n", r.Seconds, r.Sections, r.Refused)
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "faults:")
	if len(kinds) == 0 {
		fmt.Fprintf(w, " none")
	}
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d;", k, r.Faults[k])
	}
	fmt.Fprintf(w, "\nhealed within %.0f ms at most (bound %.0f ms)\n", r.HealMaxMs, r.HealBoundMs)
	fmt.Fprintf(w, "writes the Guards would have refused: %d\n", r.WouldRefuse)
	fmt.Fprintf(w, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
}
