package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMatmulCharts draws both matmul charts from a sweep of sizes and process counts: each
// names its axes with units, labels every measured N or process count, and shows the
// roofline and every implementation.
func TestMatmulCharts(t *testing.T) {
	var rows []mmResult
	for _, n := range []int{2048, 4096, 6144, 8192} {
		rows = append(rows, mmResult{Impl: "roofline", N: n, Procs: 1, Kernel: "openblas", GFlops: 100 + float64(n)/1000})
		for _, p := range []int{1, 2, 4} {
			for i, impl := range []string{"shared", "orwl", "starpu", "scalapack"} {
				rows = append(rows, mmResult{Impl: impl, N: n, Procs: p, Kernel: "openblas", GFlops: 90 + float64(i) + float64(n)/1000 - float64(p)})
			}
		}
	}
	dir := os.Getenv("CHART_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := matmulCharts(dir, rows); err != nil {
		t.Fatal(err)
	}
	for file, ticks := range map[string][]string{
		"matmul_n.svg":     {">2048<", ">4096<", ">6144<", ">8192<", ">N (matrix size)<"},
		"matmul_procs.svg": {">1<", ">2<", ">4<", ">processes (one task each)<", "N = 8192,"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(b)
		for _, want := range append(ticks, "GFLOP/s", ">roofline: 1 process, 1 kernel call, all threads<", ">orwl: SUMMA through ORWL locations<", ">shared: goroutines, rows of C, no ORWL<", ">StarPU dgemm example<", ">ScaLAPACK PDGEMM (Open MPI)<") {
			if !strings.Contains(svg, want) {
				t.Errorf("%s has no %q", file, want)
			}
		}
	}
	if err := matmulCharts(dir, nil); err == nil {
		t.Error("charts of no measurement: no error")
	}
}

// TestKernelsChart draws the kernels chart (logarithmic axes) with its labels.
func TestKernelsChart(t *testing.T) {
	var rows []result
	for _, n := range []int{256, 512, 1024, 2048} {
		rows = append(rows, result{Kernel: "openblas", N: n, GFlops: 80 + float64(n)/100}, result{Kernel: "gonum", N: n, GFlops: 15})
	}
	dir := os.Getenv("CHART_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := chart(dir, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kernels.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">N (matrix size)<", "GFLOP/s", ">openblas<", ">gonum<"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("kernels.svg has no %q", want)
		}
	}
}
