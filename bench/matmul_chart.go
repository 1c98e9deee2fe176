package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// matmulCharts writes matmul_n.svg (GFLOP/s against N, at the largest process count) and
// matmul_procs.svg (GFLOP/s against the process count, at the largest N). The roofline is
// the same in every row of an N: one process, all threads.
func matmulCharts(out string, results []mmResult) error {
	maxN, maxP := 0, 0
	for _, r := range results {
		maxN, maxP = max(maxN, r.N), max(maxP, r.Procs)
	}
	byN := func(r mmResult) (float64, bool) { return float64(r.N), r.Impl == "roofline" || r.Procs == maxP }
	byP := func(r mmResult) (float64, bool) { return float64(r.Procs), r.N == maxN && r.Impl != "roofline" }
	if err := mmChart(filepath.Join(out, "matmul_n.svg"), fmt.Sprintf("C = A·B, %d processes: GFLOP/s vs N", maxP), "N", results, byN, true); err != nil {
		return err
	}
	var roof float64
	for _, r := range results {
		if r.Impl == "roofline" && r.N == maxN {
			roof = r.GFlops
		}
	}
	title := fmt.Sprintf("C = A·B, N=%d: GFLOP/s vs processes (roofline, 1 process all threads: %.1f)", maxN, roof)
	return mmChart(filepath.Join(out, "matmul_procs.svg"), title, "processes", results, byP, false)
}

func mmChart(file, title, xlabel string, results []mmResult, x func(mmResult) (float64, bool), logX bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "GFLOP/s"
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	series := map[string]plotter.XYs{}
	var names []string
	for _, r := range results {
		xv, ok := x(r)
		if !ok || r.GFlops <= 0 {
			continue
		}
		if _, seen := series[r.Impl]; !seen {
			names = append(names, r.Impl)
		}
		series[r.Impl] = append(series[r.Impl], plotter.XY{X: xv, Y: r.GFlops})
	}
	if len(names) == 0 {
		return fmt.Errorf("chart %s: no measurement", file)
	}
	for i, name := range names {
		xys := series[name]
		slices.SortFunc(xys, func(a, b plotter.XY) int {
			switch {
			case a.X < b.X:
				return -1
			case a.X > b.X:
				return 1
			}
			return 0
		})
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	return p.Save(9*vg.Inch, 6*vg.Inch, file)
}
