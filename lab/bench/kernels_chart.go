package main

import (
	"path/filepath"
	"slices"
)

// chart writes out/kernels.svg: GFLOP/s (best round) against N, one line
// per plugin or reference, in name order, N on a logarithmic axis.
func chart(out string, results []result) error {
	var c lineChart
	for _, r := range results {
		c.add(r.Kernel, float64(r.N), r.GFlops)
	}
	slices.Sort(c.names)
	return c.save(filepath.Join(out, "kernels.svg"), chartStyle{
		title:  "DGEMM kernels: C = A·B, N×N float64, best round",
		xlabel: "N (matrix size)", ylabel: "GFLOP/s (2N³ / seconds)",
		logX: true, xTicks: true,
	})
}
