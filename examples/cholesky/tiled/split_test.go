package tiled

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/kernels"
)

// TestSplitGivesTheSameBits: with OpenBLAS on one thread, split's Dgemm and Dtrmm, and the
// panel's solve made of them, write the same bits as the kernel's own calls, on orders
// that are cut (odd ones included) and not; its Dsyrk, and the diagonal tile's
// factorisation that calls it, the same values within rounding.
func TestSplitGivesTheSameBits(t *testing.T) {
	k, err := kernels.GetCholesky("openblas")
	if err != nil {
		t.Skip(err)
	}
	if err := k.SetThreads(1); err != nil {
		t.Fatal(err)
	}
	s := split{k}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []float64 {
		m := make([]float64, n)
		for i := range m {
			m[i] = rng.Float64() - 0.5
		}
		return m
	}
	// same compares run on c0 by k and by s: bit for bit, or within rounding (tol).
	same := func(what string, n int, tol float64, run func(k kernels.Cholesky, c []float64), c0 []float64) {
		t.Helper()
		want, got := slices.Clone(c0), slices.Clone(c0)
		run(k, want)
		run(s, got)
		for i := range want {
			if math.Float64bits(want[i]) != math.Float64bits(got[i]) && !(math.Abs(got[i]-want[i]) <= tol*math.Abs(want[i])) {
				t.Fatalf("%s, order %d: [%d] is %v split, %v not", what, n, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{minSplitRows - 1, minSplitRows, 301, 512} {
		a, b := random(n*n), random(n*n)
		same("Dgemm", n, 0, func(k kernels.Cholesky, c []float64) {
			k.Dgemm(blas.NoTrans, blas.Trans, n, n, n, -1, a, n, b, n, 1, c, n)
		}, random(n*n))
		same("Dsyrk", n, 1e-13, func(k kernels.Cholesky, c []float64) {
			k.Dsyrk(blas.Lower, blas.NoTrans, n, n, -1, a, n, 1, c, n)
		}, random(n*n))
		same("Dtrmm", n, 0, func(k kernels.Cholesky, c []float64) {
			k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, n, n, 1, a, n, c, n)
		}, random(n*n))
		spd, inv := lowerTile(5, n, n)
		l := slices.Clone(spd)
		if !factorDiagonal(k, n, l, inv, n, false) {
			t.Fatal("not positive definite")
		}
		same("factorDiagonal", n, 1e-11, func(k kernels.Cholesky, c []float64) {
			factorDiagonal(k, n, c[:n*n], c[n*n:], n, false)
		}, append(slices.Clone(spd), inv...))
		same("solvePanel", n, 0, func(k kernels.Cholesky, c []float64) {
			solvePanel(k, n, n, c, l, inv, false)
		}, random(n*n))
	}
}

// TestAloneOperations: the operations that run alone in the simulated run are the first
// panel's diagonal tile and solve and the last diagonal tile's update and factorisation on
// a 1x2 grid; on a single task, all of them.
func TestAloneOperations(t *testing.T) {
	l := newLayout(4096, 512, grid.Grid{P: 1, Q: 2})
	order, alone := l.schedule()
	var got []op
	for x, o := range order {
		if alone[x] {
			got = append(got, o)
		}
	}
	want := []op{{potrf, 0, 0, 0}, {trsm, 1, 0, 0}, {syrk, 7, 7, 6}, {potrf, 7, 7, 7}}
	if !slices.Equal(got, want) {
		t.Fatalf("alone: %v; want %v", got, want)
	}
	_, alone = newLayout(1000, 100, grid.Grid{P: 1, Q: 1}).schedule()
	if slices.Contains(alone, false) {
		t.Fatalf("one task: alone %v", alone)
	}
}
