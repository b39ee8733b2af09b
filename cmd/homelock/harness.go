package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/homelock/homelock/internal/harness"
)

// runHarness is the measurement gate: a local cluster, every measure, a
// table, report.json, report.md and latency.png in --out.
func runHarness(args []string, stdout, stderr io.Writer) int {
	d := harness.DefaultOptions()
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&d.Duration, "duration", d.Duration, "length of each timed phase with many workers (hot key, many keys); the short samples take min(duration, 1s)")
	fs.IntVar(&d.Repeat, "repeat", d.Repeat, "runs of each repeated phase; the report gives their median and spread")
	fs.IntVar(&d.Nodes, "nodes", d.Nodes, "nodes in the local cluster (at least 3)")
	fs.IntVar(&d.Keys, "keys", d.Keys, "keys in the many-keys phase")
	fs.IntVar(&d.Workers, "workers", d.Workers, "workers per node in the hot-key and many-keys phases")
	fs.IntVar(&d.Parallel, "parallel", d.Parallel, "goroutines in the parallel repeat lock, each on its own key")
	fs.IntVar(&d.Delegations, "delegations", d.Delegations, "idle delegations held for the memory measure")
	fs.StringVar(&d.Dir, "dir", "", "where to put the temporary data directory (default: /dev/shm if present, else the system temp dir)")
	out := fs.String("out", "harness-out", "directory for report.json, report.md and latency.png")
	asJSON := fs.Bool("json", false, "print the JSON report to stdout instead of the table")
	check := fs.Bool("check", false, "exit with status 3 when a target is missed (without it the run exits 0 whatever it measured)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	profileDir := fs.String("profiledir", "", "write one CPU profile per measured phase into this directory (PHASE.cpu)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: homelock harness [flags]\n\nStarts a local cluster (real gRPC on loopback, real Pebble in a temporary\ndirectory removed afterwards), measures it against homelock's targets and\nprints the gate. Exit status: 0 measured (with --check: every target met),\n1 the run failed, 2 bad flags, 3 with --check a target missed, 130/143\nstopped by SIGINT/SIGTERM. Flags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := d.Validate(); err != nil {
		fmt.Fprintf(stderr, "homelock harness: %v\n", err)
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "homelock harness: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "homelock harness: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *profileDir != "" {
		if *cpuProfile != "" {
			fmt.Fprintln(stderr, "homelock harness: --cpuprofile and --profiledir exclude each other")
			return 2
		}
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "homelock harness: %v\n", err)
			return 1
		}
		d.Profile = func(phase string) func() { return profilePhase(filepath.Join(*profileDir, phaseFile(phase)), stderr) }
	}
	ctx, stop := onSignal(context.Background(), stderr, "homelock harness", "cleaning up")
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	d.Progress = func(phase string) {
		fmt.Fprintf(stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), phase)
	}
	r, err := harness.Run(ctx, d)
	// Run has closed the cluster and removed its data however it ended.
	if code, ok := stoppedCluster(ctx, stderr, "homelock harness"); ok {
		return code
	}
	if err != nil {
		fmt.Fprintf(stderr, "homelock harness: %v\n", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "homelock harness: %v\n", err)
		return 1
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "report.json"), append(js, '\n'), 0o644); err != nil {
		fmt.Fprintf(stderr, "homelock harness: %v\n", err)
		return 1
	}
	md, err := os.Create(filepath.Join(*out, "report.md"))
	if err == nil {
		r.WriteMarkdown(md)
		err = md.Close()
	}
	if err == nil {
		err = r.WritePlot(filepath.Join(*out, "latency.png"))
	}
	if err != nil {
		fmt.Fprintf(stderr, "homelock harness: writing the report: %v\n", err)
		return 1
	}
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", js)
	} else {
		r.WriteTable(stdout)
		fmt.Fprintf(stdout, "report: %s\n", filepath.Join(*out, "report.md"))
	}
	return checkStatus(r, *check, stderr)
}

// checkStatus is the exit status of a run that measured: 0, or with check
// exitMissed when a target was missed (or not measured).
func checkStatus(r *harness.Report, check bool, stderr io.Writer) int {
	missed := r.Missed()
	if !check || len(missed) == 0 {
		return 0
	}
	fmt.Fprintf(stderr, "homelock harness: --check: %d targets missed: %s\n", len(missed), strings.Join(missed, "; "))
	return exitMissed
}

const exitMissed = 3

// stoppedCluster says so, and returns 128+N, when a signal N ended ctx: what
// ran on the local cluster has closed it and removed its data by then.
func stoppedCluster(ctx context.Context, stderr io.Writer, what string) (int, bool) {
	var sig signalled
	if !errors.As(context.Cause(ctx), &sig) {
		return 0, false
	}
	fmt.Fprintf(stderr, "%s: stopped by %v; the cluster is closed and its data removed\n", what, sig.Signal)
	return 128 + int(sig.Signal), true
}

// signalled is the cause of a context ended by a signal.
type signalled struct{ syscall.Signal }

func (s signalled) Error() string { return s.Signal.String() + " signal received" }

// onSignal is signal.NotifyContext with the signal kept as the context's
// cause, so that the command can exit as a process killed by it would
// (128 + its number: 130 for SIGINT, 143 for SIGTERM). After the first
// signal the default action is restored: a second one stops the run at once
// (the harness leaves its data for the next run to remove). what is the
// command, doing what it does on the first signal.
func onSignal(parent context.Context, stderr io.Writer, what, doing string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			fmt.Fprintf(stderr, "%s: %v: %s (again to quit at once)\n", what, s, doing)
			cancel(signalled{s.(syscall.Signal)})
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel(nil)
		})
	}
}

// profilePhase starts a CPU profile into path and returns what stops it; a
// profile that cannot start is reported and the phase runs unprofiled.
func profilePhase(path string, stderr io.Writer) func() {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "homelock harness: profile %s: %v\n", path, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// phaseFile names a phase's profile: "hot key" is hot-key.cpu.
func phaseFile(phase string) string {
	if i := strings.IndexByte(phase, '('); i > 0 {
		phase = phase[:i]
	}
	return strings.ReplaceAll(strings.TrimSpace(phase), " ", "-") + ".cpu"
}
