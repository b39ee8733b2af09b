package harness

import (
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is one harness run. Every number was measured in this run.
type Report struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Measures are in the order of the phases that made them.
	Measures    []Measure `json:"measures"`
	WallSeconds float64   `json:"wall_seconds"`

	// runs are the values recorded so far, by measure key.
	runs map[string][]float64
	// latencies are the distributions for the plot, each merged over its
	// phase's repetitions, in the order first recorded; marks, the targets
	// drawn on them.
	latencies []latency
	marks     []plotMark
}

// Measure is one measured quantity over the run's repetitions of its phase.
type Measure struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	// Runs holds one value per repetition (a phase that runs once has one);
	// none if the phase did not get to measure it.
	Runs []float64 `json:"runs"`
	// Median, Min and Max summarise Runs (-1 when there are none).
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Target is the goal, as it reads ("≤ 150"); Verdict is pass, miss or
	// not measured. Both are empty for a measure without a target.
	Target  string `json:"target,omitempty"`
	Verdict string `json:"verdict,omitempty"`
}

type latency struct {
	name string
	h    *hdr.Histogram
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
	Repeat      int    `json:"repeat"`
	Nodes       int    `json:"nodes"`
	Keys        int    `json:"keys"`
	Workers     int    `json:"workers_per_node"`
	Parallel    int    `json:"parallel_repeat_goroutines"`
	Delegations int    `json:"idle_delegations"`
	EpochLease  string `json:"epoch_lease"`
	MaxLease    string `json:"max_lease"`
	DownAfter   string `json:"down_after"`
}

func machine(dir string) Machine {
	return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, DataDir: dir}
}

func newReport() *Report { return &Report{runs: map[string][]float64{}} }

// record adds one repetition's value of a measure.
func (r *Report) record(key string, v float64) { r.runs[key] = append(r.runs[key], v) }

// recordLatency merges h into the plot's distribution called name.
func (r *Report) recordLatency(name string, h *hdr.Histogram) {
	for _, l := range r.latencies {
		if l.name == name {
			l.h.Merge(h)
			return
		}
	}
	c := newHist()
	c.Merge(h)
	r.latencies = append(r.latencies, latency{name, c})
}

// measure declares a quantity a phase records, and its target if it has one.
type measure struct {
	key, name, unit string
	target          *target
	// derive, if set, computes the measure's runs from other measures once
	// every phase has run (a ratio of two phases' values).
	derive func(runs map[string][]float64) []float64
	// mark, if set, draws the target on a latency curve of the plot.
	mark *mark
}

// target is a goal on a measure's median: a fixed bound, or the median of
// another measure of the same run (ref).
type target struct {
	atMost  bool
	bound   float64
	ref     string // key of the measure whose median is the bound
	refName string // how that bound reads in the table
}

func atMost(x float64) *target  { return &target{atMost: true, bound: x} }
func atLeast(x float64) *target { return &target{bound: x} }

// atMostMeasure is a bound measured in the same run: the median of key.
func atMostMeasure(key, name string) *target {
	return &target{atMost: true, ref: key, refName: name}
}

// finish summarises every measure of phases, in their order, and checks
// the targets.
func (r *Report) finish(phases []phase) {
	var defs []measure
	declared := map[string]bool{}
	for _, p := range phases {
		defs = append(defs, p.measures...)
		for _, m := range p.measures {
			declared[m.key] = true
		}
	}
	// A value recorded under a key no phase declares is still reported,
	// by its key, after the rest: a phase's slip must not hide a number.
	for _, k := range slices.Sorted(maps.Keys(r.runs)) {
		if !declared[k] {
			defs = append(defs, measure{key: k, name: k})
		}
	}
	for _, d := range defs {
		if d.derive != nil {
			r.runs[d.key] = d.derive(r.runs)
		}
	}
	medians := map[string]float64{}
	r.Measures = r.Measures[:0]
	for _, d := range defs {
		m := Measure{Key: d.key, Name: d.name, Unit: d.unit, Runs: r.runs[d.key], Median: -1, Min: -1, Max: -1}
		if len(m.Runs) > 0 {
			m.Median = median(m.Runs)
			m.Min, m.Max = slices.Min(m.Runs), slices.Max(m.Runs)
			medians[d.key] = m.Median
		}
		if m.Runs == nil {
			m.Runs = []float64{}
		}
		r.Measures = append(r.Measures, m)
	}
	r.marks = r.marks[:0]
	for i, d := range defs {
		if d.target == nil {
			continue
		}
		r.Measures[i].Target, r.Measures[i].Verdict = d.target.check(r.Measures[i], medians)
		if b, ok := d.target.boundOf(medians); ok && d.mark != nil && unitNs[d.unit] > 0 {
			r.marks = append(r.marks, plotMark{curve: d.mark.curve, q: d.mark.q, ns: b * unitNs[d.unit],
				legend: d.target.legend(d.mark, b, d.unit)})
		}
	}
}

// unitNs is the nanoseconds in each latency unit.
var unitNs = map[string]float64{"ns": 1, "µs": 1e3, "ms": 1e6}

// legend is how a marked target reads on the plot: "target: p50 ≤ 150 ns".
func (t *target) legend(m *mark, bound float64, unit string) string {
	op := "≥"
	if t.atMost {
		op = "≤"
	}
	what := fmt.Sprintf("%s %s", fmtValue(bound), unit)
	if t.ref != "" {
		what = fmt.Sprintf("%s (%s)", t.refName, what)
	}
	return fmt.Sprintf("target: %s p%g %s %s", m.curve, m.q, op, what)
}

// boundOf is the target's bound: fixed, or the median of its reference.
func (t *target) boundOf(medians map[string]float64) (float64, bool) {
	if t.ref == "" {
		return t.bound, true
	}
	b, ok := medians[t.ref]
	return b, ok
}

func (t *target) check(m Measure, medians map[string]float64) (goal, verdict string) {
	op := "≥"
	if t.atMost {
		op = "≤"
	}
	bound, ok := t.boundOf(medians)
	switch {
	case !ok:
		return fmt.Sprintf("%s %s", op, t.refName), "not measured"
	case t.ref != "":
		goal = fmt.Sprintf("%s %s (%s)", op, t.refName, fmtValue(bound))
	case t.atMost && bound == 0:
		goal = "0"
	default:
		goal = fmt.Sprintf("%s %s", op, fmtValue(bound))
	}
	switch {
	case len(m.Runs) == 0:
		return goal, "not measured"
	case t.atMost && m.Median <= bound, !t.atMost && m.Median >= bound:
		return goal, "pass"
	}
	return goal, "miss"
}

// Missed lists the measures whose target the run did not meet (a target not
// measured is not met).
func (r *Report) Missed() []string {
	var out []string
	for _, m := range r.Measures {
		if m.Verdict != "" && m.Verdict != "pass" {
			out = append(out, m.Name)
		}
	}
	return out
}

// measure returns the summary of key (and false if the run has none).
func (r *Report) measure(key string) (Measure, bool) {
	for _, m := range r.Measures {
		if m.Key == key {
			return m, len(m.Runs) > 0
		}
	}
	return Measure{}, false
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

// spread is a measure's min-max, or "" when it ran once.
func spread(m Measure) string {
	if len(m.Runs) < 2 {
		return ""
	}
	return fmtValue(m.Min) + "–" + fmtValue(m.Max)
}

// WriteTable prints the gate as a table.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "homelock harness: %d nodes on %d CPUs, %s, %s/%s, data in %s\n", r.Settings.Nodes, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch, r.Machine.DataDir)
	fmt.Fprintf(w, "repeated phases ran %d times: the value is their median, the spread their min–max\n\n", r.Settings.Repeat)
	const row = "%-34s %10s %-17s %-6s %-26s %s\n"
	fmt.Fprintf(w, row, "measure", "median", "spread", "unit", "target", "")
	fmt.Fprintf(w, "%s\n", strings.Repeat("-", 104))
	for _, m := range r.Measures {
		fmt.Fprintf(w, row, m.Name, fmtValue(m.Median), spread(m), m.Unit, m.Target, m.Verdict)
	}
	if missed := r.Missed(); len(missed) > 0 {
		fmt.Fprintf(w, "\n%d of %d targets missed\n", len(missed), r.targets())
	} else {
		fmt.Fprintf(w, "\nevery target met (%d)\n", r.targets())
	}
	fmt.Fprintf(w, "wall time %.1fs\n", r.WallSeconds)
}

func (r *Report) targets() int {
	n := 0
	for _, m := range r.Measures {
		if m.Verdict != "" {
			n++
		}
	}
	return n
}

// WriteMarkdown writes the report as report.md.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# homelock harness report\n\n%d nodes on one machine with %d CPUs, %s (%s/%s); data directory %s.\n",
		r.Settings.Nodes, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch, r.Machine.DataDir)
	fmt.Fprintf(w, "Settings: duration %s per timed phase, each repeated phase run %d times, %d keys, %d workers per node, %d goroutines in the parallel repeat lock, %d idle delegations, EpochLease %s, MaxLease %s, DownAfter %s.\n\n",
		r.Settings.Duration, r.Settings.Repeat, r.Settings.Keys, r.Settings.Workers, r.Settings.Parallel, r.Settings.Delegations, r.Settings.EpochLease, r.Settings.MaxLease, r.Settings.DownAfter)
	fmt.Fprintf(w, "| measure | median | spread (min–max) | runs | unit | target | verdict |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, m := range r.Measures {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s |\n", m.Name, fmtValue(m.Median), spread(m), len(m.Runs), m.Unit, m.Target, m.Verdict)
	}
	fmt.Fprintf(w, "\nEvery number above was measured in this run (wall time %.1f s). Percentiles come from HdrHistogram.\n", r.WallSeconds)
	fmt.Fprintf(w, "\n![latency](latency.png)\n")
}
