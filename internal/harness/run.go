package harness

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Options are the harness's knobs.
type Options struct {
	// Duration is the length of each timed phase (hot key, many keys, and
	// the store-throughput samples).
	Duration    time.Duration
	Nodes       int
	Keys        int
	Workers     int
	Delegations int
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
	return Options{Duration: 5 * time.Second, Nodes: 3, Keys: 64, Workers: 4, Delegations: 1_000_000}
}

// Run starts the cluster, measures everything, and removes its data: each
// phase's directory when the phase ends, and the run's directory however Run
// returns (a cancelled ctx ends the phase under way, closes the cluster and
// returns ctx's error).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Nodes < 3 {
		return nil, fmt.Errorf("harness: --nodes must be at least 3, got %d", o.Nodes)
	}
	if o.Duration <= 0 || o.Keys <= 0 || o.Workers <= 0 || o.Delegations <= 0 {
		return nil, fmt.Errorf("harness: duration, keys, workers and delegations must be positive")
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	start := time.Now()
	wd, swept, err := newWorkDir(workParent(o.Dir))
	for _, d := range swept {
		progress("removed a dead run's data: " + d)
	}
	if err != nil {
		return nil, err
	}
	defer wd.remove()
	r := &Report{Machine: machine(wd.path), latencies: map[string]*hdr.Histogram{}}
	r.Settings = Settings{Duration: o.Duration.String(), Nodes: o.Nodes, Keys: o.Keys, Workers: o.Workers, Delegations: o.Delegations}
	setUnmeasured(r)

	sample := min(o.Duration, 2*time.Second)
	// Write throughput is noisy on a shared machine: each sample is cut
	// into windows and the median window counts, and the run without
	// homelock is sampled before the cluster starts and after it stops.
	progress("store writes without homelock")
	off, err := storeWrites(ctx, wd.sub("store-off"), sample)
	if err != nil {
		return r, err
	}
	progress("starting the cluster")
	c, err := startCluster(ctx, wd.sub("cluster"), o.Nodes)
	if err != nil {
		return r, err
	}
	defer c.close()
	cfg := c.cfgs[0]
	r.Settings.EpochLease, r.Settings.MaxLease, r.Settings.DownAfter = cfg.EpochLease.String(), cfg.MaxLease.String(), cfg.DownAfter.String()

	progress("store writes with homelock idle")
	idle, err := storeWrites(ctx, wd.sub("store-idle"), sample)
	if err != nil {
		return r, err
	}
	r.StoreWritesPerSIdle = median(idle)

	steps := []struct {
		name string
		run  func() error
	}{
		{"repeat lock", func() error { return c.repeatLock(ctx, r, min(o.Duration, 2*time.Second)) }},
		{"first lock", func() error { return c.firstLock(ctx, r, 1000) }},
		{"hot key", func() error { return c.hotKey(ctx, r, o.Duration, o.Workers) }},
		{"many keys", func() error {
			ops, hist, err := c.manyKeys(ctx, o.Duration, o.Workers, o.Keys, true)
			if err == nil {
				r.ManyKeysOpsPerS = ops
				r.ManyKeysUsP50, r.ManyKeysUsP99 = float64(hist.ValueAtQuantile(50)), float64(hist.ValueAtQuantile(99))
				r.latencies["many keys op (µs)"] = hist
			}
			return err
		}},
		{"many keys, lock only", func() error {
			ops, hist, err := c.manyKeys(ctx, sample, o.Workers, o.Keys, false)
			if err == nil {
				r.ManyKeysLockOnlyOpsPerS = ops
				r.ManyKeysLockOnlyUsP50 = float64(hist.ValueAtQuantile(50))
			}
			return err
		}},
		{"store writes while locking", func() error {
			// Its own window, so that the store benchmark's CPU does not
			// count against the many-keys measure above.
			done := make(chan float64, 1)
			go func() {
				v, _ := storeWrites(ctx, wd.sub("store-locking"), sample)
				done <- median(v)
			}()
			_, _, err := c.manyKeys(ctx, sample, o.Workers, o.Keys, true)
			r.StoreWritesPerSLocking = <-done
			return err
		}},
		{"reclaim after a home restart", func() error { return c.reclaim(ctx, r) }},
		{"rehome after a node is killed", func() error { return c.rehome(ctx, r) }},
	}
	profile := o.Profile
	if profile == nil {
		profile = func(string) func() { return func() {} }
	}
	for _, s := range steps {
		progress(s.name)
		end := profile(s.name)
		err := s.run()
		end()
		if err != nil {
			return r, fmt.Errorf("%s: %w", s.name, err)
		}
		// What the phase freed goes back to the system, so that the run's
		// peak is its largest phase, not their sum.
		debug.FreeOSMemory()
	}
	c.close()
	debug.FreeOSMemory()
	progress("store writes without homelock, again")
	off2, err := storeWrites(ctx, wd.sub("store-off-2"), sample)
	if err != nil {
		return r, err
	}
	r.StoreWritesPerSOff = median(append(off, off2...))
	r.FeatureOffRatio = r.StoreWritesPerSIdle / r.StoreWritesPerSOff

	progress(fmt.Sprintf("%d idle delegations", o.Delegations))
	end := profile("idle delegations")
	err = idleDelegations(ctx, wd.sub("idle"), o.Delegations, r)
	end()
	if err != nil {
		return r, fmt.Errorf("idle delegations: %w", err)
	}
	r.WallSeconds = time.Since(start).Seconds()
	return r, nil
}

// setUnmeasured marks every measure -1 until its phase sets it.
func setUnmeasured(r *Report) {
	for _, p := range []*float64{&r.RepeatLockNsP50, &r.RepeatLockNsP99, &r.RepeatLockMsgs, &r.FirstLockRemoteUsP50,
		&r.FirstLockRemoteUsP99, &r.FirstLockLocalUsP50, &r.FirstLockLocalUsP99, &r.HotKeyHandoffsPerS,
		&r.HotKeyUpdatesPerS, &r.HotKeyFairnessJain, &r.HotKeyWaitUsP50, &r.HotKeyWaitUsP99, &r.HotKeyLostUpdates,
		&r.ManyKeysOpsPerS, &r.ManyKeysUsP50, &r.ManyKeysUsP99, &r.ManyKeysLockOnlyOpsPerS, &r.ManyKeysLockOnlyUsP50,
		&r.HotKeyHoldUsP50, &r.HotKeyGapUsP50, &r.MsgsPerAcquisition, &r.BytesPerAcquisition,
		&r.MsgsPerHandoff, &r.BytesPerHandoff, &r.StoreWritesPerSOff, &r.StoreWritesPerSIdle, &r.StoreWritesPerSLocking,
		&r.FeatureOffRatio, &r.ReclaimMs, &r.RehomeMs, &r.RehomeDetectMs, &r.RehomeBoundMs, &r.BytesPerIdleDelegation, &r.IdleDelegations} {
		*p = -1
	}
}
