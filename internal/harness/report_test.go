package harness

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestTargetCheck(t *testing.T) {
	medians := map[string]float64{"rtt": 40}
	for _, tc := range []struct {
		name          string
		target        *target
		runs          []float64
		goal, verdict string
	}{
		{"at most, met", atMost(150), []float64{149, 150, 400}, "≤ 150", "pass"},
		{"at most, missed", atMost(150), []float64{151, 100, 200}, "≤ 150", "miss"},
		{"at least, met", atLeast(1.8), []float64{1.8}, "≥ 1.8", "pass"},
		{"at least, missed", atLeast(10000), []float64{9999}, "≥ 10000", "miss"},
		{"zero reads as zero", atMost(0), []float64{0, 0, 1}, "0", "pass"},
		{"not measured", atMost(150), nil, "≤ 150", "not measured"},
		{"against a measure of the run", atMostMeasure("rtt", "gRPC RTT"), []float64{39, 41, 40}, "≤ gRPC RTT (40)", "pass"},
		{"against a measure of the run, missed", atMostMeasure("rtt", "gRPC RTT"), []float64{41}, "≤ gRPC RTT (40)", "miss"},
		{"against a measure the run lacks", atMostMeasure("none", "bound"), []float64{1}, "≤ bound", "not measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Measure{Runs: tc.runs, Median: -1}
			if len(tc.runs) > 0 {
				m.Median = median(tc.runs)
			}
			goal, verdict := tc.target.check(m, medians)
			if goal != tc.goal || verdict != tc.verdict {
				t.Errorf("check = %q, %q; want %q, %q", goal, verdict, tc.goal, tc.verdict)
			}
		})
	}
}

func TestFinish(t *testing.T) {
	phases := []phase{
		{name: "a", measures: []measure{
			{key: "lat", name: "latency", unit: "ns", target: atMost(150)},
			{key: "ratio", name: "ratio", target: atLeast(1), derive: func(runs map[string][]float64) []float64 {
				var out []float64
				for i, v := range runs["x"] {
					out = append(out, v/runs["y"][i])
				}
				return out
			}},
		}},
		{name: "b", once: true, measures: []measure{
			{key: "x", name: "x"}, {key: "y", name: "y"}, {key: "never", name: "never", target: atMost(1)},
		}},
	}
	r := newReport()
	for _, v := range []float64{300, 100, 120} {
		r.record("lat", v)
	}
	r.record("x", 2)
	r.record("y", 4)
	r.record("undeclared", 7)
	r.finish(phases)

	var keys []string
	for _, m := range r.Measures {
		keys = append(keys, m.Key)
	}
	if want := []string{"lat", "ratio", "x", "y", "never", "undeclared"}; !slices.Equal(keys, want) {
		t.Fatalf("measures %v, want %v (the phases' order, then what no phase declared)", keys, want)
	}
	lat := r.Measures[0]
	if lat.Median != 120 || lat.Min != 100 || lat.Max != 300 || lat.Verdict != "pass" {
		t.Errorf("latency = %+v, want median 120 in 100–300, pass", lat)
	}
	if !slices.Equal(lat.Runs, []float64{300, 100, 120}) {
		t.Errorf("latency runs %v: the summary must not reorder them", lat.Runs)
	}
	if ratio := r.Measures[1]; ratio.Median != 0.5 || ratio.Verdict != "miss" {
		t.Errorf("ratio = %+v, want the derived 0.5, miss", ratio)
	}
	if never := r.Measures[4]; never.Median != -1 || never.Verdict != "not measured" || never.Runs == nil {
		t.Errorf("never = %+v, want -1, not measured, empty runs", never)
	}
	if missed := r.Missed(); !slices.Equal(missed, []string{"ratio", "never"}) {
		t.Errorf("missed %v, want [ratio never]", missed)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	for _, want := range []string{"100–300", "2 of 3 targets missed"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestSchedule(t *testing.T) {
	ps := []phase{
		{name: "rehome", stage: onCluster, once: true},
		{name: "hot", stage: onCluster},
		{name: "idle", stage: afterCluster, once: true},
		{name: "off", stage: beforeCluster},
		{name: "first", stage: onCluster},
		{name: "off-again", stage: afterCluster},
	}
	var got []string
	for _, s := range schedule(ps, 2) {
		got = append(got, s.phase.name+"/"+string(rune('0'+s.round)))
	}
	want := []string{"off/0", "off/1", "hot/0", "first/0", "hot/1", "first/1", "rehome/0", "off-again/0", "off-again/1", "idle/0"}
	if !slices.Equal(got, want) {
		t.Errorf("schedule\n got %v\nwant %v", got, want)
	}
}
