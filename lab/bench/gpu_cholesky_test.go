package main

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/cublas"
	"github.com/orwl-go/orwl/kernels/openblas"
)

// TestGPUCholeskyRows measures the rows at a small order where cublas (a GPU, or a
// stand-in set with ORWL_CUDA_LIB), libcusolver and OpenBLAS are available: every row is
// there, timed, verified (or gpuCholeskyRows fails), and compared with its reference. On a
// GPU, ORWL_BENCH_GPU_CHOLESKY_N=16384 (say) measures that order instead, on every core,
// and logs the rows.
func TestGPUCholeskyRows(t *testing.T) {
	if _, err := cublas.SolverLibrary(); err != nil {
		t.Skipf("cublas or cusolver unavailable: %v", err)
	}
	if _, err := kernels.GetCholesky(openblas.Name); err != nil {
		t.Skipf("openblas unavailable: %v", err)
	}
	n, cores := 512, 3
	if env := os.Getenv("ORWL_BENCH_GPU_CHOLESKY_N"); env != "" {
		var err error
		if n, err = strconv.Atoi(env); err != nil {
			t.Fatalf("ORWL_BENCH_GPU_CHOLESKY_N=%q: %v", env, err)
		}
		cores = runtime.NumCPU()
	}
	rows, err := gpuCholeskyRows(n, 2, cores)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ impl, ref string }{
		{"dpotrf-openblas", ""}, {"cusolver-resident", "dpotrf-openblas"}, {"cusolver-h2h", "cusolver-resident"},
		{"orwl-gpu", "dpotrf-openblas"}, {"orwl-gpu", "dpotrf-openblas"}, {"orwl-hybrid", "dpotrf-openblas"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, r := range rows {
		t.Logf("%+v", r)
		if r.Figure != "cholesky" || r.Impl != want[i].impl || r.Ref != want[i].ref || r.N != n || !(r.Seconds > 0) || !(r.GFlops > 0) {
			t.Fatalf("row %d: %+v", i, r)
		}
		if (r.Ref != "") != (r.Ratio > 0) {
			t.Fatalf("row %d: ratio %g with reference %q", i, r.Ratio, r.Ref)
		}
	}
	if rows[3].Note == rows[4].Note {
		t.Fatalf("the orwl-gpu rows have the same tile size: %q", rows[3].Note)
	}
	if _, err := gpuCholeskyRows(n, 1, 1); err == nil {
		t.Fatal("one core: no error")
	}
}

// TestFactorResidual: the residual of a correct factor is small, of a wrong one large.
func TestFactorResidual(t *testing.T) {
	g, err := kernels.GetCholesky(kernels.Default)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	a := make([]float64, n*n)
	fillSPD(a, n, 5)
	if !g.Dpotrf('L', n, a, n) {
		t.Fatal("not positive definite")
	}
	if err := checkFactor(a, n, 5); err != nil {
		t.Fatal(err)
	}
	a[50*n+20] += 1e-6
	if err := checkFactor(a, n, 5); err == nil {
		t.Fatal("a wrong factor verified")
	}
}

// TestGPUTileSizes: n/4 within 256 to 4096, at most n; and half.
func TestGPUTileSizes(t *testing.T) {
	for _, c := range []struct{ n, nb int }{{100, 100}, {512, 256}, {4096, 1024}, {16384, 4096}, {65536, 4096}} {
		if nb, half := gpuTileSizes(c.n); nb != c.nb || half != c.nb/2 {
			t.Fatalf("gpuTileSizes(%d) = %d, %d; want %d, %d", c.n, nb, half, c.nb, c.nb/2)
		}
	}
}
