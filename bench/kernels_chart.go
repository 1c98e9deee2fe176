package main

import (
	"path/filepath"
	"slices"
)

// chart writes out/kernels.svg: GFLOP/s (best round) against N, one line
// per plugin or reference, in name order, both axes logarithmic.
func chart(out string, results []result) error {
	var c lineChart
	for _, r := range results {
		c.add(r.Kernel, float64(r.N), r.GFlops)
	}
	slices.Sort(c.names)
	return c.save(filepath.Join(out, "kernels.svg"), "DGEMM kernels: GFLOP/s vs N (N×N×N)", "N", "GFLOP/s", true, true)
}
