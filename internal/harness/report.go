package harness

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is one harness run. Every number was measured in this run; a field
// that could not be measured is -1.
type Report struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`

	RepeatLockNsP50 float64 `json:"repeat_lock_ns_p50"`
	RepeatLockNsP99 float64 `json:"repeat_lock_ns_p99"`
	RepeatLockMsgs  float64 `json:"repeat_lock_msgs"`
	RepeatLocks     float64 `json:"repeat_locks"`

	FirstLockRemoteUsP50 float64 `json:"first_lock_remote_us_p50"`
	FirstLockRemoteUsP99 float64 `json:"first_lock_remote_us_p99"`
	FirstLockLocalUsP50  float64 `json:"first_lock_local_us_p50"`
	FirstLockLocalUsP99  float64 `json:"first_lock_local_us_p99"`

	HotKeyHandoffsPerS float64   `json:"hot_key_handoffs_per_s"`
	HotKeyUpdatesPerS  float64   `json:"hot_key_updates_per_s"`
	HotKeyFairnessJain float64   `json:"hot_key_fairness_jain"`
	HotKeyShares       []float64 `json:"hot_key_shares"`
	HotKeyWaitUsP50    float64   `json:"hot_key_wait_us_p50"`
	HotKeyWaitUsP99    float64   `json:"hot_key_wait_us_p99"`
	HotKeyLostUpdates  float64   `json:"hot_key_lost_updates"`
	// A handoff's two serial parts (p50): a grant in use, and the gap to the
	// next grant's first admission.
	HotKeyHoldUsP50 float64 `json:"hot_key_hold_us_p50"`
	HotKeyGapUsP50  float64 `json:"hot_key_gap_us_p50"`

	ManyKeysOpsPerS float64 `json:"many_keys_ops_per_s"`
	ManyKeysUsP50   float64 `json:"many_keys_us_p50"`
	ManyKeysUsP99   float64 `json:"many_keys_us_p99"`
	// The same without the store: lock and unlock only.
	ManyKeysLockOnlyOpsPerS float64 `json:"many_keys_lock_only_ops_per_s"`
	ManyKeysLockOnlyUsP50   float64 `json:"many_keys_lock_only_us_p50"`

	MsgsPerAcquisition  float64 `json:"msgs_per_acquisition"`
	BytesPerAcquisition float64 `json:"bytes_per_acquisition"`
	MsgsPerHandoff      float64 `json:"msgs_per_handoff"`
	BytesPerHandoff     float64 `json:"bytes_per_handoff"`

	StoreWritesPerSOff     float64 `json:"store_writes_per_s_off"`
	StoreWritesPerSIdle    float64 `json:"store_writes_per_s_idle"`
	StoreWritesPerSLocking float64 `json:"store_writes_per_s_locking"`
	FeatureOffRatio        float64 `json:"feature_off_ratio"`

	ReclaimMs float64 `json:"reclaim_ms"`
	RehomeMs  float64 `json:"rehome_ms"`
	// RehomeDetectMs is detection, measured: from the kill until node 0
	// learned an epoch without the killed node (memberlist, DownAfter,
	// agreement). RehomeBoundMs, the target, adds EpochLease + Skew and one
	// RetryInterval for the grant itself.
	RehomeDetectMs float64 `json:"rehome_detect_ms"`
	RehomeBoundMs  float64 `json:"rehome_bound_ms"`

	BytesPerIdleDelegation float64 `json:"bytes_per_idle_delegation"`
	IdleDelegations        float64 `json:"idle_delegations"`

	Guard GuardReport `json:"guard"`

	WallSeconds float64 `json:"wall_seconds"`
	// Latencies keeps the histograms for the plot.
	latencies map[string]*hdr.Histogram
}

// Machine names where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	DataDir   string `json:"data_dir"`
}

// Settings are the run's knobs.
type Settings struct {
	Duration    string `json:"duration"`
	Nodes       int    `json:"nodes"`
	Keys        int    `json:"keys"`
	Workers     int    `json:"workers_per_node"`
	Delegations int    `json:"idle_delegations"`
	EpochLease  string `json:"epoch_lease"`
	MaxLease    string `json:"max_lease"`
	DownAfter   string `json:"down_after"`
}

func machine(dir string) Machine {
	return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, DataDir: dir}
}

// target is one row of the gate: a measured value against its goal.
type target struct {
	name, unit string
	value      float64
	goal       string
	pass       func(v float64) bool
}

func (r *Report) targets() []target {
	le := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	ge := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	return append([]target{
		{"repeat lock+unlock p50", "ns", r.RepeatLockNsP50, "≤ 250", le(250)},
		{"repeat lock messages", "msgs", r.RepeatLockMsgs, "0", le(0)},
		{"first lock, remote home p50", "µs", r.FirstLockRemoteUsP50, "≤ 100", le(100)},
		{"first lock, local home p50", "µs", r.FirstLockLocalUsP50, "", nil},
		{"hot key handoffs", "/s", r.HotKeyHandoffsPerS, "≥ 5000", ge(5000)},
		{"hot key fairness (Jain)", "", r.HotKeyFairnessJain, "≥ 0.95", ge(0.95)},
		{"hot key wait p99", "µs", r.HotKeyWaitUsP99, "", nil},
		{"hot key lost updates", "", r.HotKeyLostUpdates, "0", le(0)},
		{"hot key: grant in use p50", "µs", r.HotKeyHoldUsP50, "", nil},
		{"hot key: gap to next grant p50", "µs", r.HotKeyGapUsP50, "", nil},
		{"many keys", "ops/s", r.ManyKeysOpsPerS, "≥ 50000", ge(50000)},
		{"many keys, lock only", "ops/s", r.ManyKeysLockOnlyOpsPerS, "", nil},
		{"messages per handoff", "msgs", r.MsgsPerHandoff, "≤ 4", le(4)},
		{"bytes per handoff", "B", r.BytesPerHandoff, "≤ 512", le(512)},
		{"messages per acquisition", "msgs", r.MsgsPerAcquisition, "", nil},
		{"feature-off ratio", "", r.FeatureOffRatio, "≥ 0.98", ge(0.98)},
		{"reclaim after home restart", "ms", r.ReclaimMs, "≤ 10", le(10)},
		{"rehome: detection (agreed down)", "ms", r.RehomeDetectMs, "", nil},
		{"rehome after node kill", "ms", r.RehomeMs, fmt.Sprintf("≤ %.0f", r.RehomeBoundMs), le(r.RehomeBoundMs)},
		{"heap per idle delegation", "B", r.BytesPerIdleDelegation, "≤ 256", le(256)},
	}, r.guardTargets()...)
}

func verdict(t target) string {
	switch {
	case t.value < 0:
		return "not measured"
	case t.pass == nil:
		return ""
	case t.pass(t.value):
		return "pass"
	}
	return "miss"
}

func fmtValue(v float64) string {
	switch {
	case v < 0:
		return "-"
	case v == math.Trunc(v) && math.Abs(v) < 1e12:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// WriteTable prints the gate as a table.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "homelock harness: %d nodes on %d CPUs, %s, %s/%s, data in %s\n\n", r.Settings.Nodes, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch, r.Machine.DataDir)
	fmt.Fprintf(w, "%-30s %14s %-6s %-10s %s\n", "measure", "value", "unit", "target", "")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 72))
	for _, t := range r.targets() {
		fmt.Fprintf(w, "%-30s %14s %-6s %-10s %s\n", t.name, fmtValue(t.value), t.unit, t.goal, verdict(t))
	}
	fmt.Fprintf(w, "\nhot key: %.0f updates/s, shares %s; many keys p50 %s µs p99 %s µs; store writes/s off %s, idle %s, locking %s\n",
		r.HotKeyUpdatesPerS, shares(r.HotKeyShares), fmtValue(r.ManyKeysUsP50), fmtValue(r.ManyKeysUsP99),
		fmtValue(r.StoreWritesPerSOff), fmtValue(r.StoreWritesPerSIdle), fmtValue(r.StoreWritesPerSLocking))
	fmt.Fprintf(w, "wall time %.1fs\n", r.WallSeconds)
}

func shares(s []float64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// WriteMarkdown writes the report as report.md.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# homelock harness report\n\n%d nodes on one machine with %d CPUs, %s (%s/%s); data directory %s.\n",
		r.Settings.Nodes, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch, r.Machine.DataDir)
	fmt.Fprintf(w, "Settings: duration %s per phase, %d keys, %d workers per node, %d idle delegations, EpochLease %s, MaxLease %s, DownAfter %s.\n\n",
		r.Settings.Duration, r.Settings.Keys, r.Settings.Workers, r.Settings.Delegations, r.Settings.EpochLease, r.Settings.MaxLease, r.Settings.DownAfter)
	fmt.Fprintf(w, "| measure | value | unit | target | verdict |\n| --- | --- | --- | --- | --- |\n")
	for _, t := range r.targets() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.name, fmtValue(t.value), t.unit, t.goal, verdict(t))
	}
	fmt.Fprintf(w, "\nEvery number above was measured in this run (wall time %.1f s). Percentiles come from HdrHistogram.\n", r.WallSeconds)
	fmt.Fprintf(w, "![latency](latency.png)\n")
}
