package main

import (
	"fmt"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// chart writes out/kernels.svg: GFLOP/s (best round) against N, one line
// per plugin or reference, both axes logarithmic.
func chart(out string, results []result) error {
	p := plot.New()
	p.Title.Text = "DGEMM kernels: GFLOP/s vs N (N×N×N)"
	p.X.Label.Text = "N"
	p.Y.Label.Text = "GFLOP/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true

	series := map[string]plotter.XYs{}
	var names []string
	for _, r := range results {
		if r.GFlops <= 0 {
			continue
		}
		if _, ok := series[r.Kernel]; !ok {
			names = append(names, r.Kernel)
		}
		series[r.Kernel] = append(series[r.Kernel], plotter.XY{X: float64(r.N), Y: r.GFlops})
	}
	if len(names) == 0 {
		return fmt.Errorf("chart: no measurement")
	}
	sort.Strings(names)
	for i, name := range names {
		xys := series[name]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i / 7)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	return p.Save(9*vg.Inch, 6*vg.Inch, filepath.Join(out, "kernels.svg"))
}
