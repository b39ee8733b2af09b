package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// Run starts the cluster, measures everything, and removes its data.
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
	root, err := tempRoot(o.Dir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	r := &Report{Machine: machine(root), latencies: map[string]*hdr.Histogram{}}
	r.Settings = Settings{Duration: o.Duration.String(), Nodes: o.Nodes, Keys: o.Keys, Workers: o.Workers, Delegations: o.Delegations}
	setUnmeasured(r)

	sample := min(o.Duration, 2*time.Second)
	// Write throughput is noisy on a shared machine: each sample is cut
	// into windows and the median window counts, and the run without
	// homelock is sampled before the cluster starts and after it stops.
	progress("store writes without homelock")
	off, err := storeWrites(filepath.Join(root, "store-off"), sample)
	if err != nil {
		return r, err
	}
	progress("store writes through the Guard")
	if r.Guard, err = guardWrites(filepath.Join(root, "guard"), sample); err != nil {
		return r, err
	}
	progress("starting the cluster")
	c, err := startCluster(ctx, root, o.Nodes)
	if err != nil {
		return r, err
	}
	defer c.close()
	cfg := c.cfgs[0]
	r.Settings.EpochLease, r.Settings.MaxLease, r.Settings.DownAfter = cfg.EpochLease.String(), cfg.MaxLease.String(), cfg.DownAfter.String()

	progress("store writes with homelock idle")
	idle, err := storeWrites(filepath.Join(root, "store-idle"), sample)
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
		{"hot key", func() error {
			return c.countWouldRefuse(ctx, r, func() error { return c.hotKey(ctx, r, o.Duration, o.Workers) })
		}},
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
				v, _ := storeWrites(filepath.Join(root, "store-locking"), sample)
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
	}
	c.close()
	progress("store writes without homelock, again")
	off2, err := storeWrites(filepath.Join(root, "store-off-2"), sample)
	if err != nil {
		return r, err
	}
	r.StoreWritesPerSOff = median(append(off, off2...))
	r.FeatureOffRatio = r.StoreWritesPerSIdle / r.StoreWritesPerSOff

	progress(fmt.Sprintf("%d idle delegations", o.Delegations))
	end := profile("idle delegations")
	err = idleDelegations(ctx, root, o.Delegations, r)
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
	r.Guard = unmeasuredGuard()
}
