package cublas

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	lapack "gonum.org/v1/gonum/lapack/gonum"

	"github.com/orwl-go/orwl/kernels"
)

// The registry's cublas kernel has the Cholesky operations.
func TestGetCholesky(t *testing.T) {
	if err := Load(); err != nil {
		t.Skipf("cublas unavailable: %v", err)
	}
	k, err := kernels.GetCholesky(Name)
	if err != nil {
		t.Fatal(err)
	}
	k.(*Kernel).Close()
}

// TestCholeskyPinned factors and inverts a tile in pinned memory, with padding, and
// compares with gonum; the upper triangle and the padding must not change.
func TestCholeskyPinned(t *testing.T) {
	g := kernel(t)
	const n, ld = 70, 75
	a, err := AllocHost(n * ld)
	if err != nil {
		t.Fatal(err)
	}
	defer FreeHost(a)
	for i := range n {
		for j := range ld {
			a[i*ld+j] = float64((i*7+j*3)%11)/11 - 0.5
		}
		a[i*ld+i] = n
	}
	want := append([]float64(nil), a...)
	orig := append([]float64(nil), a...)
	if !g.Dpotrf(blas.Lower, n, a, ld) || !(lapack.Implementation{}).Dpotrf(blas.Lower, n, want, ld) {
		t.Fatal("Dpotrf failed")
	}
	if !g.Dtrtri(blas.Lower, blas.NonUnit, n, a, ld) || !(lapack.Implementation{}).Dtrtri(blas.Lower, blas.NonUnit, n, want, ld) {
		t.Fatal("Dtrtri failed")
	}
	for i := range n {
		for j := range ld {
			got, w := a[i*ld+j], want[i*ld+j]
			if j > i && got != orig[i*ld+j] {
				t.Fatalf("[%d][%d] outside the lower triangle changed", i, j)
			}
			if d := got - w; d > 1e-13 || d < -1e-13 {
				t.Fatalf("[%d][%d] = %v, gonum %v", i, j, got, w)
			}
		}
	}
}

// TestSolverCandidates: the libcusolver files of each directory, newest major first and
// the soname link of each major preferred, then the sonames for the loader.
func TestSolverCandidates(t *testing.T) {
	d1, d2, empty := t.TempDir(), t.TempDir(), t.TempDir()
	for _, f := range []string{"libcusolver.so.11", "libcusolver.so.11.7.5.82", "libcusolver.so.12.0.3.29", "libcusolver.so.12", "libcusolver.so.x"} {
		if err := os.WriteFile(filepath.Join(d1, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d2, "libcusolver.so.13.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, none := solverCandidates([]string{d1, empty, d1, d2})
	want := []string{filepath.Join(d1, "libcusolver.so.12"), filepath.Join(d1, "libcusolver.so.11"), filepath.Join(d2, "libcusolver.so.13.1"),
		"libcusolver.so.12", "libcusolver.so.11"}
	if !slices.Equal(paths, want) {
		t.Fatalf("candidates %q, want %q", paths, want)
	}
	if !slices.Equal(none, []string{filepath.Join(empty, "libcusolver.so.*")}) {
		t.Fatalf("directories without libcusolver: %q", none)
	}
}

// TestSolverMissing: where the loader has no libcusolver either, the error names every
// place tried.
func TestSolverMissing(t *testing.T) {
	dir := t.TempDir()
	s, err := openSolver([]string{dir})
	if err == nil {
		t.Skipf("the dynamic loader finds %s", s.path)
	}
	for _, want := range []string{filepath.Join(dir, "libcusolver.so.*"), "libcusolver.so.12", "libcusolver.so.11", EnvLib} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	t.Logf("as expected here: %v", err)
}
