package harness

import (
	"context"
	"fmt"
	"time"
)

// phaseList is every phase of a run, in the report's order (Run orders them
// by stage, see phase). A new phase is one entry here: its stage, whether it
// runs once, the measures it records (with their targets), and its function,
// which records each measure once per run through e.r.record(key, value).
func phaseList(o Options) []phase {
	par := o.Parallel
	return []phase{
		{
			name: "repeat lock", stage: onCluster,
			measures: []measure{
				{key: "repeat_lock_ns_p50", name: "repeat lock+unlock p50", unit: "ns", target: atMost(150), mark: &mark{"repeat lock+unlock", 50}},
				{key: "repeat_lock_ns_p99", name: "repeat lock+unlock p99", unit: "ns"},
				{key: "stopwatch_ns_p50", name: "repeat lock: stopwatch alone p50", unit: "ns"},
				{key: "repeat_lock_msgs", name: "repeat lock messages", unit: "msgs", target: atMost(0)},
				{key: "repeat_lock_ops_per_s", name: "repeat lock, 1 goroutine", unit: "ops/s"},
				{key: "repeat_lock_parallel_ops_per_s", name: fmt.Sprintf("repeat lock, %d goroutines", par), unit: "ops/s"},
				{key: "repeat_lock_scaling", name: fmt.Sprintf("repeat lock scaling, %d / 1", par), unit: "×", target: atLeast(1.8)},
			},
			run: func(ctx context.Context, e *env) error { return e.c.repeatLock(ctx, e.r, e.o.short(), par) },
		},
		{
			name: "first lock", stage: onCluster,
			measures: []measure{
				{key: "grpc_unary_us_p50", name: "gRPC unary round trip p50", unit: "µs"},
				{key: "grpc_unary_one_proc_us_p50", name: "gRPC round trip, 1 thread p50", unit: "µs"},
				{key: "first_lock_remote_us_p50", name: "first lock, remote home p50", unit: "µs", target: atMostMeasure("grpc_unary_us_p50", "gRPC RTT"), mark: &mark{"first lock, remote home", 50}},
				{key: "first_lock_remote_us_p99", name: "first lock, remote home p99", unit: "µs"},
				{key: "first_lock_local_us_p50", name: "first lock, local home p50", unit: "µs"},
				{key: "msgs_per_acquisition", name: "messages per acquisition", unit: "msgs"},
				{key: "bytes_per_acquisition", name: "bytes per acquisition", unit: "B"},
			},
			run: func(ctx context.Context, e *env) error { return e.c.firstLock(ctx, e.r, 1000) },
		},
		{
			name: "hot key", stage: onCluster,
			measures: []measure{
				{key: "hot_key_handoffs_per_s", name: "hot key handoffs", unit: "/s", target: atLeast(10000)},
				{key: "hot_key_updates_per_s", name: "hot key updates", unit: "/s"},
				{key: "hot_key_fairness_jain", name: "hot key fairness (Jain)", target: atLeast(0.95)},
				{key: "hot_key_lost_updates", name: "hot key lost updates", target: atMost(0)},
				{key: "hot_key_wait_us_p50", name: "hot key wait p50", unit: "µs"},
				{key: "hot_key_wait_us_p99", name: "hot key wait p99", unit: "µs"},
				{key: "hot_key_hold_us_p50", name: "hot key: grant in use p50", unit: "µs"},
				{key: "hot_key_gap_us_p50", name: "hot key: gap to next grant p50", unit: "µs"},
				{key: "hot_key_gap_one_hop_us_p50", name: "hot key: gap, one hop p50", unit: "µs"},
				{key: "hot_key_gap_two_hops_us_p50", name: "hot key: gap, two hops p50", unit: "µs"},
				{key: "msgs_per_handoff", name: "messages per handoff", unit: "msgs", target: atMost(4)},
				{key: "bytes_per_handoff", name: "bytes per handoff", unit: "B", target: atMost(512)},
				{key: "hot_key_would_refuse", name: "hot key: would-refuse (shadow Guard)", target: atMost(0)},
			},
			run: func(ctx context.Context, e *env) error {
				// A key per repetition: its counter must end at this
				// repetition's acknowledged updates.
				return e.c.countWouldRefuse(ctx, e.r, func() error {
					return e.c.hotKey(ctx, e.r, fmt.Sprintf("hot-%d", e.round), e.o.Duration, e.o.Workers)
				})
			},
		},
		{
			name: "many keys, lock only", stage: onCluster,
			measures: []measure{
				{key: "many_keys_lock_only_ops_per_s", name: fmt.Sprintf("%d keys, lock only", o.Keys), unit: "ops/s", target: atLeast(50000)},
				{key: "many_keys_lock_only_us_p50", name: fmt.Sprintf("%d keys, lock only p50", o.Keys), unit: "µs"},
				{key: "many_keys_lock_only_us_p99", name: fmt.Sprintf("%d keys, lock only p99", o.Keys), unit: "µs"},
			},
			run: manyKeysPhase("many_keys_lock_only", false, ""),
		},
		{
			name: "many keys", stage: onCluster,
			measures: []measure{
				{key: "many_keys_ops_per_s", name: fmt.Sprintf("%d keys, with the store's write", o.Keys), unit: "ops/s", target: atLeast(30000)},
				{key: "many_keys_us_p50", name: fmt.Sprintf("%d keys, with the write p50", o.Keys), unit: "µs"},
				{key: "many_keys_us_p99", name: fmt.Sprintf("%d keys, with the write p99", o.Keys), unit: "µs"},
			},
			run: manyKeysPhase("many_keys", true, fmt.Sprintf("%d keys, lock and write", o.Keys)),
		},
		// What running homelock costs a store that does not use it: the
		// store's write throughput with no homelock in the process (before
		// the cluster starts and after it closes), beside a cluster that is
		// idle, and beside one that is busy.
		{
			name: "store writes without homelock", stage: beforeCluster,
			measures: []measure{
				{key: "store_writes_per_s_off", name: "store writes, no homelock", unit: "/s"},
			},
			run: storePhase("store_writes_per_s_off", "store-off", true),
		},
		{
			name: "store writes through the Guard", stage: beforeCluster,
			measures: []measure{
				{key: "guard_plain_writes_per_s", name: "synced writes, plain", unit: "/s"},
				{key: "guard_writes_per_s", name: "synced writes through the Guard", unit: "/s"},
				{key: "guard_added_us_p50", name: "Guard added per write p50", unit: "µs", target: atMost(5)},
			},
			run: guardPhase,
		},
		{
			name: "homelock idle", stage: onCluster,
			measures: []measure{
				{key: "idle_cpu_ms_per_s", name: fmt.Sprintf("homelock idle, CPU of %d nodes", o.Nodes), unit: "ms/s"},
			},
			run: idleCPU,
		},
		{
			name: "store writes with homelock idle", stage: onCluster,
			measures: []measure{
				{key: "store_writes_per_s_idle", name: "store writes, homelock idle", unit: "/s"},
				{key: "feature_off_ratio", name: "feature-off ratio (idle / none)", target: atLeast(0.98), derive: featureOff},
			},
			run: storePhase("store_writes_per_s_idle", "store-idle", false),
		},
		{
			name: "store writes while locking", stage: onCluster,
			measures: []measure{
				{key: "store_writes_per_s_locking", name: "store writes, homelock busy", unit: "/s"},
			},
			run: func(ctx context.Context, e *env) error {
				// Its own window, so that the store benchmark's CPU does
				// not count against the many-keys measures.
				done := make(chan float64, 1)
				go func() {
					v, _ := storeWrites(ctx, e.wd.sub(fmt.Sprintf("store-locking-%d", e.round)), e.o.short())
					done <- median(v)
				}()
				_, _, err := e.c.manyKeys(ctx, e.o.short(), e.o.Workers, e.o.Keys, true)
				if v := <-done; v >= 0 {
					e.r.record("store_writes_per_s_locking", v)
				}
				return err
			},
		},
		{
			name: "reclaim after a home restart", stage: onCluster,
			measures: []measure{
				{key: "reclaim_ms", name: "reclaim after home restart", unit: "ms", target: atMost(10)},
			},
			run: func(ctx context.Context, e *env) error { return e.c.reclaim(ctx, e.r, e.round) },
		},
		{
			name: "rehome after a node is killed", stage: onCluster, once: true,
			measures: []measure{
				{key: "rehome_detect_ms", name: "rehome: detection (agreed down)", unit: "ms"},
				{key: "rehome_bound_ms", name: "rehome: bound", unit: "ms"},
				{key: "rehome_ms", name: "rehome after node kill", unit: "ms", target: atMostMeasure("rehome_bound_ms", "bound")},
			},
			run: func(ctx context.Context, e *env) error { return e.c.rehome(ctx, e.r) },
		},
		{
			name: "store writes without homelock, again", stage: afterCluster,
			run: storePhase("store_writes_per_s_off", "store-off-again", false),
		},
		{
			name: fmt.Sprintf("%d idle delegations", o.Delegations), stage: afterCluster, once: true,
			measures: []measure{
				{key: "heap_per_idle_delegation_holder", name: "heap per idle delegation, holder", unit: "B", target: atMost(128)},
				{key: "heap_per_idle_delegation_home", name: "heap per idle delegation, home", unit: "B", target: atMost(128)},
				{key: "heap_per_idle_delegation", name: "heap per idle delegation, both", unit: "B"},
				{key: "idle_delegations", name: "idle delegations held", unit: ""},
			},
			run: func(ctx context.Context, e *env) error {
				return idleDelegations(ctx, e.wd.sub("idle"), e.o.Delegations, e.r)
			},
		},
	}
}

// manyKeysPhase records a many-keys sample as prefix_ops_per_s, _us_p50 and
// _us_p99, and its latency as the plot's curve if one is named.
func manyKeysPhase(prefix string, write bool, curve string) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		ops, hist, err := e.c.manyKeys(ctx, e.o.Duration, e.o.Workers, e.o.Keys, write)
		if err != nil {
			return err
		}
		e.r.record(prefix+"_ops_per_s", ops)
		e.r.record(prefix+"_us_p50", us(hist.ValueAtQuantile(50)))
		e.r.record(prefix+"_us_p99", us(hist.ValueAtQuantile(99)))
		if curve != "" {
			e.r.recordLatency(curve, hist)
		}
		return nil
	}
}

// storePhase records into key one store-throughput sample: the median of its
// windows, which keeps the windows a flush or the machine's other load hit
// out of it. With warm, the first repetition runs a sample it does not
// record: the first Pebble of a process writes on a heap and pages the
// process never had, and ran at half the rate of every later sample.
func storePhase(key, dir string, warm bool) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		if warm && e.round == 0 {
			if _, err := storeWrites(ctx, e.wd.sub(dir+"-warm"), e.o.short()); err != nil {
				return err
			}
		}
		v, err := storeWrites(ctx, e.wd.sub(fmt.Sprintf("%s-%d", dir, e.round)), e.o.short())
		if err == nil {
			e.r.record(key, median(v))
		}
		return err
	}
}

// idleCPU records the CPU the idle cluster uses (gossip, liveness rounds,
// timers), the process's own over a short window with nothing else
// running: what homelock idle can take from a store, which the feature-off
// ratio's two throughputs, taken at different times on a shared machine,
// show only through their noise.
func idleCPU(ctx context.Context, e *env) error {
	if e.c != nil {
		// The example store's deferred work (pruning the busy phases'
		// receipts, Pebble's flushes and compactions) is the store's, not
		// homelock's: the window starts once it is done, or after
		// storeSettleWait.
		e.c.settleStores(ctx)
	}
	c0, ok := processCPU()
	if !ok {
		return nil
	}
	t0 := time.Now()
	select {
	case <-time.After(e.o.short()):
	case <-ctx.Done():
		return ctx.Err()
	}
	c1, _ := processCPU()
	e.r.record("idle_cpu_ms_per_s", float64(c1-c0)/float64(time.Millisecond)/time.Since(t0).Seconds())
	return nil
}

// featureOff is each idle sample against the median of every sample without
// homelock (before the cluster and after it).
func featureOff(runs map[string][]float64) []float64 {
	off := median(runs["store_writes_per_s_off"])
	if off <= 0 {
		return nil
	}
	var out []float64
	for _, v := range runs["store_writes_per_s_idle"] {
		out = append(out, v/off)
	}
	return out
}
