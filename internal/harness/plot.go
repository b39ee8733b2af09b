package harness

import (
	"image/color"

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
	colors := []color.RGBA{{R: 200, A: 255}, {G: 140, A: 255}, {B: 200, A: 255}, {R: 160, B: 160, A: 255}, {R: 200, G: 120, A: 255}}
	for i, l := range r.latencies {
		var pts plotter.XYs
		for _, q := range []float64{1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9} {
			pts = append(pts, plotter.XY{X: q, Y: us(max(1, l.h.ValueAtQuantile(q)))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
