package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
)

// matmulCharts writes matmul_n.svg (GFLOP/s against N, at one process per core when that
// count was measured, else the largest) and matmul_procs.svg (GFLOP/s against the process
// count, at the largest N), every implementation on the same axes. The roofline (one
// process, one kernel call with all threads) is the same for every process count of an N:
// a line against N, a flat line against processes.
func matmulCharts(out string, results []mmResult) error {
	maxN, procs, kernel := 0, 0, ""
	var counts []int
	for _, r := range results {
		maxN, kernel = max(maxN, r.N), r.Kernel
		if r.Impl != "roofline" {
			counts = append(counts, r.Procs)
		}
	}
	if len(counts) == 0 {
		return fmt.Errorf("matmul charts: no measurement")
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)
	if procs = counts[len(counts)-1]; slices.Contains(counts, runtime.NumCPU()) {
		procs = runtime.NumCPU()
	}
	var byN, byP lineChart
	for _, r := range results {
		name := mmSeriesNames[r.Impl]
		if name == "" {
			name = r.Impl
		}
		if r.Impl == "roofline" || r.Procs == procs {
			byN.add(name, float64(r.N), r.GFlops)
		}
		if r.N != maxN {
			continue
		}
		if r.Impl == "roofline" {
			for _, p := range counts {
				byP.add(name, float64(p), r.GFlops)
			}
		} else {
			byP.add(name, float64(r.Procs), r.GFlops)
		}
	}
	yl := "GFLOP/s (2N³ / seconds, fastest multiplication)"
	if err := byN.save(filepath.Join(out, "matmul_n.svg"), chartStyle{
		title: fmt.Sprintf("C = A·B of N×N float64 matrices against N\n%d processes on %d cores, %s kernel, kernel threads = cores / processes",
			procs, runtime.NumCPU(), kernel),
		xlabel: "N (matrix size)", ylabel: yl, xTicks: true,
	}); err != nil {
		return err
	}
	return byP.save(filepath.Join(out, "matmul_procs.svg"), chartStyle{
		title: fmt.Sprintf("C = A·B of N×N float64 matrices, N = %d, against the process count\n%d cores, %s kernel, kernel threads = cores / processes (at least 1)",
			maxN, runtime.NumCPU(), kernel),
		xlabel: "processes (one task each)", ylabel: yl, xTicks: true,
	})
}

// mmSeriesNames are the legend entries of the matmul rows.
var mmSeriesNames = map[string]string{
	"roofline":  "roofline: 1 process, 1 kernel call, all threads",
	"orwl":      "orwl: SUMMA through ORWL locations",
	"shared":    "shared: goroutines, rows of C, no ORWL",
	"starpu":    "StarPU dgemm example",
	"scalapack": "ScaLAPACK PDGEMM (Open MPI)",
}
