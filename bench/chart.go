package main

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// lineChart collects the points of a chart: one line with points per series,
// drawn in the order of names.
type lineChart struct {
	names  []string
	series map[string]plotter.XYs
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

// save writes the chart to file as a 9×6 inch SVG: X logarithmic when logX,
// Y logarithmic when logY and from 0 otherwise, legend top left.
func (c *lineChart) save(file, title, xlabel, ylabel string, logX, logY bool) error {
	if len(c.names) == 0 {
		return fmt.Errorf("chart %s: no measurement", file)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	for i, name := range c.names {
		xys := c.series[name]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, line.Dashes = plotutil.Color(i), plotutil.Dashes(i/7) // dashed once the colours repeat
		points.Color, points.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	return p.Save(9*vg.Inch, 6*vg.Inch, file)
}
