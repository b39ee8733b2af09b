package harness

import (
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws the latency distributions measured in µs as percentile
// curves into a PNG.
func (r *Report) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = "homelock harness: latency by percentile"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{}
	names := make([]string, 0, len(r.latencies))
	for name := range r.latencies {
		if name != "repeat lock (ns)" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	colors := []color.RGBA{{R: 200, A: 255}, {G: 140, A: 255}, {B: 200, A: 255}, {R: 160, B: 160, A: 255}, {R: 200, G: 120, A: 255}}
	for i, name := range names {
		h := r.latencies[name]
		var pts plotter.XYs
		for _, q := range []float64{1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9} {
			pts = append(pts, plotter.XY{X: q, Y: float64(max(1, h.ValueAtQuantile(q)))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(name, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
