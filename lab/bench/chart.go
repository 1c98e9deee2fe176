package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// lineChart collects the points of a chart: one line with points per series,
// drawn in the order of names.
type lineChart struct {
	names  []string
	series map[string]plotter.XYs
}

// chartStyle says how a lineChart is drawn.
type chartStyle struct {
	title          string // one or more lines
	xlabel, ylabel string // with their units
	logX, logY     bool   // logarithmic axes (else linear, Y from 0)
	// xTicks labels every x that has a point, and only those (a few sizes or process
	// counts).
	xTicks bool
}

// add adds the point (x, y) to the series name; points without a positive y
// are left out.
func (c *lineChart) add(name string, x, y float64) {
	if y <= 0 {
		return
	}
	if c.series == nil {
		c.series = map[string]plotter.XYs{}
	}
	if _, seen := c.series[name]; !seen {
		c.names = append(c.names, name)
	}
	c.series[name] = append(c.series[name], plotter.XY{X: x, Y: y})
}

// Size of the charts, and the gap between the plot and its legend, right of it.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 6 * vg.Inch
	legendGap   = 12 // points
)

// save writes the chart to file (its format from the extension, e.g. .svg): the plot, with
// the legend in a column right of it, outside the data, from the top of the data area.
func (c *lineChart) save(file string, st chartStyle) error {
	if len(c.names) == 0 {
		return fmt.Errorf("chart %s: no measurement", file)
	}
	p := plot.New()
	p.Title.Text = st.title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text, p.Y.Label.Text = st.xlabel, st.ylabel
	if st.logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if st.logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left, legend.Padding = true, true, vg.Points(4)
	var xs []float64
	for i, name := range c.names {
		pts := c.series[name]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, line.Dashes = plotutil.Color(i), plotutil.Dashes(i/7) // dashed once the colours repeat
		points.Color, points.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		legend.Add(name, line, points)
		for _, pt := range pts {
			xs = append(xs, pt.X)
		}
	}
	if st.xTicks {
		slices.Sort(xs)
		xs = slices.Compact(xs)
		var ticks plot.ConstantTicks
		for _, x := range xs {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
		p.X.Tick.Marker = ticks
		if span := max(xs[len(xs)-1]-xs[0], 1); st.logX {
			p.X.Min, p.X.Max = xs[0]/1.1, xs[len(xs)-1]*1.1
		} else {
			p.X.Min, p.X.Max = xs[0]-span/20, xs[len(xs)-1]+span/20
		}
	}
	if !st.logY {
		p.Y.Max *= 1.08 // the highest point off the frame
	}
	cv, err := draw.NewFormattedCanvas(chartWidth, chartHeight, strings.TrimPrefix(filepath.Ext(file), "."))
	if err != nil {
		return err
	}
	dc := draw.New(cv)
	// Room for the legend's text in a wider font than the one measured, should the
	// viewer not have it.
	legendWidth := legend.Rectangle(dc).Size().X*6/5 + vg.Points(2*legendGap)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	data := p.DataCanvas(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: chartWidth - legendWidth + vg.Points(legendGap), Y: data.Min.Y},
		Max: vg.Point{X: chartWidth, Y: data.Max.Y},
	}})
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := cv.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
