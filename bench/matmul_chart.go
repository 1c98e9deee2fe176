package main

import (
	"fmt"
	"path/filepath"
)

// matmulCharts writes matmul_n.svg (GFLOP/s against N, at the largest process count) and
// matmul_procs.svg (GFLOP/s against the process count, at the largest N). The roofline is
// the same in every row of an N: one process, all threads; it is a line of the first
// chart and a figure in the title of the second.
func matmulCharts(out string, results []mmResult) error {
	maxN, maxP := 0, 0
	for _, r := range results {
		maxN, maxP = max(maxN, r.N), max(maxP, r.Procs)
	}
	var byN, byP lineChart
	var roof float64
	for _, r := range results {
		if r.Impl == "roofline" || r.Procs == maxP {
			byN.add(r.Impl, float64(r.N), r.GFlops)
		}
		if r.N == maxN {
			if r.Impl == "roofline" {
				roof = r.GFlops
			} else {
				byP.add(r.Impl, float64(r.Procs), r.GFlops)
			}
		}
	}
	if err := byN.save(filepath.Join(out, "matmul_n.svg"), fmt.Sprintf("C = A·B, %d processes: GFLOP/s vs N", maxP), "N", "GFLOP/s", true, false); err != nil {
		return err
	}
	title := fmt.Sprintf("C = A·B, N=%d: GFLOP/s vs processes (roofline, 1 process all threads: %.1f)", maxN, roof)
	return byP.save(filepath.Join(out, "matmul_procs.svg"), title, "processes", "GFLOP/s", false, false)
}
