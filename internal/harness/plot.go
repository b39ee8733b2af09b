package harness

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// mark puts a measure's target on the plot: the measure is the percentile q
// of the latency curve named curve.
type mark struct {
	curve string
	q     float64
}

// plotMark is a target as drawn: where, and what the legend says.
type plotMark struct {
	curve  string
	q, ns  float64
	legend string
}

// nines is the plot's x for percentile q: each step right is one more nine
// (p90 at 1, p99 at 2, p99.9 at 3), the axis of HdrHistogram's own plots.
func nines(q float64) float64 { return -math.Log10(1 - q/100) }

// maxNines is how far the curves go: p99.9.
const maxNines = 3

// WritePlot draws every latency distribution as latency against percentile
// into a PNG at path: percentiles on a nines axis, latency on a log axis
// (one axis for nanoseconds to seconds), the targets marked on their curves,
// the legend beside the plot so that it hides no line.
func (r *Report) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = "homelock harness: latency by percentile"
	if r.Settings.Repeat > 1 {
		p.Title.Text += fmt.Sprintf(" (%d runs of each phase merged)", r.Settings.Repeat)
	}
	p.X.Label.Text = "percentile (each step right is one more nine)"
	p.X.Min, p.X.Max = 0, maxNines
	p.X.Tick.Marker = ninesTicks{}
	p.Y.Label.Text = "latency (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = durationTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 210}
	grid.Horizontal.Color = color.Gray{Y: 210}
	p.Add(grid)

	// The y axis spans whole decades, so that both ends carry a label.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range r.latencies {
		lo, hi = min(lo, float64(max(1, l.h.Min()))), max(hi, float64(l.h.ValueAtQuantile(99.9)))
	}
	for _, m := range r.marks {
		lo, hi = min(lo, m.ns), max(hi, m.ns)
	}
	if lo <= hi {
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	}

	legend := plot.NewLegend()
	legend.TextStyle.Font.Size = vg.Points(11)
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(24)
	legend.Padding = vg.Points(5)
	styles := map[string]draw.LineStyle{}
	for i, l := range r.latencies {
		var pts plotter.XYs
		for x := 0.0; x <= maxNines+1e-9; x += 0.025 {
			q := 100 * (1 - math.Pow(10, -x))
			pts = append(pts, plotter.XY{X: x, Y: float64(max(1, l.h.ValueAtQuantile(q)))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.LineStyle = curveStyle(l.name, i)
		styles[l.name] = line.LineStyle
		p.Add(line)
		legend.Add(fmt.Sprintf("%s (%d samples)", l.name, l.h.TotalCount()), line)
	}
	for _, m := range r.marks {
		style, ok := styles[m.curve]
		if !ok {
			continue
		}
		s, err := plotter.NewScatter(plotter.XYs{{X: nines(m.q), Y: m.ns}})
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(6), Shape: targetGlyph{}}
		p.Add(s)
		legend.Add(m.legend, s)
	}

	const width, height, legendWidth = 12.5 * vg.Inch, 6 * vg.Inch, 4.8 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	margin := vg.Points(10)
	p.Draw(draw.Crop(dc, margin, -legendWidth, margin, -margin))
	legend.Draw(draw.Crop(dc, width-legendWidth+2*margin, -margin, 0, -4*margin))

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// curveStyle gives the known curves fixed styles (colour-blind-safe colours,
// the gRPC yardstick dashed black) and any other the next free colour.
func curveStyle(name string, i int) draw.LineStyle {
	palette := []color.RGBA{
		{0x00, 0x72, 0xb2, 0xff}, {0xd5, 0x5e, 0x00, 0xff}, {0x00, 0x9e, 0x73, 0xff},
		{0xcc, 0x79, 0xa7, 0xff}, {0xe6, 0x9f, 0x00, 0xff}, {0x56, 0xb4, 0xe9, 0xff},
	}
	s := draw.LineStyle{Width: vg.Points(2), Color: palette[i%len(palette)]}
	if name == "gRPC unary round trip" {
		s.Color = color.Black
		s.Width = vg.Points(1.5)
		s.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return s
}

// targetGlyph is a ring with a cross: a target, not a measurement.
type targetGlyph struct{}

func (targetGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.5)})
	r := sty.Radius
	var ring vg.Path
	ring.Move(vg.Point{X: pt.X + r, Y: pt.Y})
	ring.Arc(pt, r, 0, 2*math.Pi)
	ring.Close()
	c.Stroke(ring)
	var cross vg.Path
	cross.Move(vg.Point{X: pt.X - r, Y: pt.Y})
	cross.Line(vg.Point{X: pt.X + r, Y: pt.Y})
	cross.Move(vg.Point{X: pt.X, Y: pt.Y - r})
	cross.Line(vg.Point{X: pt.X, Y: pt.Y + r})
	c.Stroke(cross)
}

// ninesTicks label the nines axis at p0, p50, p90, p99, p99.9.
type ninesTicks struct{}

func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range []struct {
		q     float64
		label string
	}{{0, "0%"}, {50, "50%"}, {90, "90%"}, {99, "99%"}, {99.9, "99.9%"}} {
		if x := nines(t.q); x >= lo-1e-9 && x <= hi+1e-9 {
			out = append(out, plot.Tick{Value: x, Label: t.label})
		}
	}
	return out
}

// durationTicks label a log axis of nanoseconds at each power of ten, as a
// duration ("100 ns", "1 µs", "10 ms"), with unlabelled ticks between.
type durationTicks struct{}

func (durationTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(max(lo, 1))); e <= math.Ceil(math.Log10(max(hi, 1))); e++ {
		decade := math.Pow(10, e)
		out = append(out, plot.Tick{Value: decade, Label: fmtNs(decade)})
		for m := 2.0; m < 10; m++ {
			out = append(out, plot.Tick{Value: m * decade})
		}
	}
	return out
}

func fmtNs(ns float64) string {
	for _, u := range []struct {
		scale float64
		unit  string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if ns >= u.scale {
			return fmt.Sprintf("%g %s", ns/u.scale, u.unit)
		}
	}
	return fmt.Sprintf("%g ns", ns)
}
