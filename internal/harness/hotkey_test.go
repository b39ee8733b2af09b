//go:build unix

package harness

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

// BenchmarkHotKey runs the harness's hot-key phase alone (the full harness
// takes minutes): a 3-node cluster, HOMELOCK_HOT_WORKERS workers per node (4)
// doing the read-increment-write of one counter for HOMELOCK_HOT_DURATION
// (3s) per iteration, in the harness's work directory (tmpfs when there is
// one); run it with -benchtime=Nx. It reports handoffs/s and
// the delegation messages per handoff, in total and per kind, so that an A/B
// of two builds (interleaved, the machine is shared) shows what a protocol
// or transport change saves.
func BenchmarkHotKey(b *testing.B) {
	d, workers := 3*time.Second, 4
	if v := os.Getenv("HOMELOCK_HOT_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	if v := os.Getenv("HOMELOCK_HOT_WORKERS"); v != "" {
		if _, err := fmt.Sscan(v, &workers); err != nil {
			b.Fatal(err)
		}
	}
	ctx, c := benchCluster(b)
	r := newReport()
	kinds0 := c.sentByKind()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		if err := c.countWouldRefuse(ctx, r, func() error { return c.hotKey(ctx, r, fmt.Sprintf("hot-%d", i), d, workers) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1 := cpuTime(b)
	kinds1 := c.sentByKind()
	mean := func(key string) float64 {
		var s float64
		for _, v := range r.runs[key] {
			s += v
		}
		return s / float64(len(r.runs[key]))
	}
	b.ReportMetric(mean("hot_key_handoffs_per_s"), "handoffs/s")
	b.ReportMetric(mean("msgs_per_handoff"), "msgs/handoff")
	b.ReportMetric(mean("hot_key_fairness_jain"), "jain")
	b.ReportMetric(mean("hot_key_lost_updates")+mean("hot_key_would_refuse"), "lost+refused")
	// What a hop costs: the gap to the next grant when the home is one
	// end of the handoff, and when it is neither (A → H → B).
	b.ReportMetric(mean("hot_key_gap_one_hop_us_p50"), "gap-1hop-µs")
	b.ReportMetric(mean("hot_key_gap_two_hops_us_p50"), "gap-2hops-µs")
	handoffs := mean("hot_key_handoffs_per_s") * d.Seconds() * float64(b.N)
	if handoffs > 0 {
		// The process's CPU time (all three nodes) per handoff: on a shared
		// machine a steadier figure than handoffs/s, which the other load
		// sets as much as the code.
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/handoffs, "cpu-µs/handoff")
	}
	var names []string
	for k := range kinds1 {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if n := kinds1[k] - kinds0[k]; n > 0 && handoffs > 0 {
			b.ReportMetric(float64(n)/handoffs, k+"/handoff")
		}
	}
}

// benchCluster starts a 3-node cluster for a benchmark, closed and removed
// when it ends, where the harness puts its own (tmpfs when there is one): on
// a disk every synced write of the store would cost an fsync, and the
// benchmark would measure the disk (650 to 1,060 handoffs/s on this
// project's VM, against the harness's 5,000 to 7,000).
func benchCluster(b *testing.B) (context.Context, *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	w, _, err := newWorkDir(workParent(""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.remove() })
	c, err := startCluster(ctx, w.sub("cluster"), 3, nil)
	if c != nil {
		b.Cleanup(c.close)
	}
	if err != nil {
		b.Fatal(err)
	}
	return ctx, c
}

// sentByKind sums the delegation messages sent, per kind, and the stream
// frames, over every node.
func (c *cluster) sentByKind() map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		st := n.Stats()
		for kind, ks := range st.ByKind {
			if delegationKind[kind] {
				out[kind] += ks.Sent.Msgs
			}
		}
		// Every frame, epoch traffic's too (a few per second).
		out["frames"] += st.Frames
	}
	return out
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, ok := processCPU()
	if !ok {
		b.Fatal("no process CPU time here")
	}
	return d
}
