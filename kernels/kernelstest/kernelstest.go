// Package kernelstest is the correctness suite shared by all kernel plugins.
// Each plugin's tests call [Dgemm] and [Invalid] with their kernel, so every
// plugin is held to the same contract: results equal to a naive triple loop
// within a relative error bound, and argument errors identical to gonum's.
//
// It is test support only: programs must not import it.
package kernelstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/orwl-go/orwl/kernels"
)

// Tol is the accepted error relative to |alpha|·|op(A)|·|op(B)| + |beta|·|C|,
// element by element.
const Tol = 1e-13

// padding is added to leading dimensions in the "padded" layouts; the padding
// holds a sentinel that Dgemm must neither read into C nor overwrite.
const padding = 3

const sentinel = -7777.25

// shapes are the (m, n, k) tested, with odd, non-square and degenerate sizes.
var shapes = [][3]int{
	{1, 1, 1}, {7, 7, 7}, {1, 7, 33}, {7, 33, 1}, {33, 1, 7},
	{33, 7, 257}, {257, 33, 7}, {7, 257, 33}, {65, 129, 17}, {7, 5, 0},
}

// scalars are the (alpha, beta) pairs tested.
var scalars = [][2]float64{{1, 0}, {1, 1}, {0, 1}, {0, 0.5}, {-1.5, 0.5}, {2, 1}, {0.25, 0}}

var transposes = []blas.Transpose{blas.NoTrans, blas.Trans}

// Dgemm runs the correctness suite on g: every shape, transpose combination,
// (alpha, beta) pair, and tight and padded leading dimensions; it also checks
// that A, B and the padding of C are left untouched, that beta == 0 ignores
// NaNs in C, and that blas.ConjTrans behaves as blas.Trans.
func Dgemm(t *testing.T, g kernels.Gemm) {
	rnd := rand.New(rand.NewPCG(1, 2))
	type gemmCase struct {
		mnk    [3]int
		tA, tB blas.Transpose
	}
	cs := expand([]gemmCase{{}}, shapes, func(c gemmCase, s [3]int) gemmCase { c.mnk = s; return c })
	cs = expand(cs, transposes, func(c gemmCase, tA blas.Transpose) gemmCase { c.tA = tA; return c })
	cs = expand(cs, transposes, func(c gemmCase, tB blas.Transpose) gemmCase { c.tB = tB; return c })
	for _, c := range cs {
		m, n, k := c.mnk[0], c.mnk[1], c.mnk[2]
		opA := random(rnd, m, k)
		opB := random(rnd, k, n)
		c0 := random(rnd, m, n)
		prod, abs := naive(opA, opB, m, n, k)
		for _, pad := range []int{0, padding} {
			for _, ab := range scalars {
				name := fmt.Sprintf("m%d_n%d_k%d_%c%c_a%g_b%g_pad%d", m, n, k, c.tA, c.tB, ab[0], ab[1], pad)
				one(t, g, name, c.tA, c.tB, m, n, k, ab[0], ab[1], opA, opB, c0, prod, abs, pad)
			}
		}
	}
	t.Run("ConjTrans", func(t *testing.T) {
		m, n, k := 7, 5, 3
		opA, opB, c0 := random(rnd, m, k), random(rnd, k, n), random(rnd, m, n)
		prod, abs := naive(opA, opB, m, n, k)
		one(t, g, "CC", blas.ConjTrans, blas.ConjTrans, m, n, k, 1.5, 0.5, opA, opB, c0, prod, abs, 1)
	})
}

// expand returns every case of cs with every value of vs set by set: the cartesian product
// of the parameters of a suite, one loop instead of a nest.
func expand[C, V any](cs []C, vs []V, set func(C, V) C) []C {
	out := make([]C, 0, len(cs)*len(vs))
	for _, c := range cs {
		for _, v := range vs {
			out = append(out, set(c, v))
		}
	}
	return out
}

// one runs a single Dgemm call and checks it against the naive product.
func one(t *testing.T, g kernels.Gemm, name string, tA, tB blas.Transpose, m, n, k int, alpha, beta float64, opA, opB, c0, prod, abs [][]float64, pad int) {
	t.Helper()
	a, lda := store(opA, m, k, tA != blas.NoTrans, pad)
	b, ldb := store(opB, k, n, tB != blas.NoTrans, pad)
	c, ldc := store(c0, m, n, false, pad)
	if beta == 0 {
		for i := range m {
			for j := range n {
				c[i*ldc+j] = math.NaN()
			}
		}
	}
	a0, b0 := append([]float64(nil), a...), append([]float64(nil), b...)
	g.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	unchanged(t, name, "A", a, a0)
	unchanged(t, name, "B", b, b0)
	for i := range m {
		for j := range min(ldc, len(c)-i*ldc) {
			got := c[i*ldc+j]
			if j >= n {
				if got != sentinel {
					t.Fatalf("%s: padding C[%d][%d] = %g, want untouched", name, i, j, got)
				}
				continue
			}
			want := alpha * prod[i][j]
			bound := math.Abs(alpha) * abs[i][j]
			if beta != 0 {
				want += beta * c0[i][j]
				bound += math.Abs(beta * c0[i][j])
			}
			if d := math.Abs(got - want); !(d <= Tol*bound) {
				t.Fatalf("%s: C[%d][%d] = %v, want %v (error %.3g > %.3g)", name, i, j, got, want, d, Tol*bound)
			}
		}
	}
}

// unchanged fails the test when operand x differs from its copy x0, bit for bit (NaNs
// included).
func unchanged(t *testing.T, name, operand string, x, x0 []float64) {
	t.Helper()
	for i := range x {
		if math.Float64bits(x[i]) != math.Float64bits(x0[i]) {
			t.Fatalf("%s: %s modified at %d", name, operand, i)
		}
	}
}

// random returns an r×c matrix of values in [-1, 1).
func random(rnd *rand.Rand, r, c int) [][]float64 {
	x := make([][]float64, r)
	for i := range x {
		x[i] = make([]float64, c)
		for j := range x[i] {
			x[i][j] = 2*rnd.Float64() - 1
		}
	}
	return x
}

// naive returns op(A)·op(B) and |op(A)|·|op(B)| by the triple loop.
func naive(opA, opB [][]float64, m, n, k int) (prod, abs [][]float64) {
	prod, abs = make([][]float64, m), make([][]float64, m)
	for i := range m {
		prod[i], abs[i] = make([]float64, n), make([]float64, n)
		for j := range n {
			var s, sa float64
			for l := range k {
				s += opA[i][l] * opB[l][j]
				sa += math.Abs(opA[i][l] * opB[l][j])
			}
			prod[i][j], abs[i][j] = s, sa
		}
	}
	return prod, abs
}

// store lays out the r×c logical matrix x row-major, transposed when trans
// (so that op() of the stored matrix is x), with the leading dimension
// padded by pad sentinel columns. It returns the slice and the leading
// dimension, which is at least 1 as BLAS requires.
func store(x [][]float64, r, c int, trans bool, pad int) ([]float64, int) {
	rows, cols := r, c
	if trans {
		rows, cols = c, r
	}
	ld := max(1, cols+pad)
	s := make([]float64, max(0, (rows-1)*ld+cols))
	for i := range s {
		s[i] = sentinel
	}
	for i := range r {
		for j := range c {
			if trans {
				s[j*ld+i] = x[i][j]
			} else {
				s[i*ld+j] = x[i][j]
			}
		}
	}
	return s, ld
}

// call is one Dgemm invocation used by Invalid.
type call struct {
	name          string
	tA, tB        blas.Transpose
	m, n, k       int
	alpha, beta   float64
	la, lb, lc    int // slice lengths
	lda, ldb, ldc int
}

// invalid lists argument errors (and quick returns that must not panic) in
// the spirit of gonum's own tests.
var invalid = []call{
	{"badTransA", 'x', blas.NoTrans, 2, 2, 2, 1, 0, 4, 4, 4, 2, 2, 2},
	{"badTransB", blas.NoTrans, 0, 2, 2, 2, 1, 0, 4, 4, 4, 2, 2, 2},
	{"mNeg", blas.NoTrans, blas.NoTrans, -1, 2, 2, 1, 0, 4, 4, 4, 2, 2, 2},
	{"nNeg", blas.NoTrans, blas.NoTrans, 2, -1, 2, 1, 0, 4, 4, 4, 2, 2, 2},
	{"kNeg", blas.NoTrans, blas.NoTrans, 2, 2, -1, 1, 0, 4, 4, 4, 2, 2, 2},
	{"mNegBadLd", blas.NoTrans, blas.NoTrans, -1, 2, 2, 1, 0, 4, 4, 4, 0, 0, 0},
	{"ldaSmallN", blas.NoTrans, blas.NoTrans, 2, 3, 4, 1, 0, 8, 12, 6, 3, 3, 3},
	{"ldaSmallT", blas.Trans, blas.NoTrans, 3, 2, 2, 1, 0, 6, 4, 6, 2, 2, 2},
	{"ldaZero", blas.NoTrans, blas.NoTrans, 2, 2, 0, 1, 0, 4, 4, 4, 0, 2, 2},
	{"ldbSmallN", blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, 0, 4, 6, 6, 2, 2, 3},
	{"ldbSmallT", blas.NoTrans, blas.Trans, 2, 2, 3, 1, 0, 6, 6, 4, 3, 2, 2},
	{"ldcSmall", blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, 0, 4, 6, 6, 2, 3, 2},
	{"ldaBeforeShort", blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, 0, 0, 0, 0, 1, 2, 2},
	{"shortAN", blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, 0, 3, 4, 4, 2, 2, 2},
	{"shortAT", blas.Trans, blas.NoTrans, 3, 2, 2, 1, 0, 5, 4, 6, 3, 2, 2},
	{"shortBN", blas.NoTrans, blas.NoTrans, 2, 3, 2, 1, 0, 4, 5, 6, 2, 3, 3},
	{"shortBT", blas.NoTrans, blas.Trans, 2, 3, 2, 1, 0, 4, 5, 6, 2, 2, 3},
	{"shortC", blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, 0, 4, 4, 3, 2, 2, 2},
	{"shortCQuick", blas.NoTrans, blas.NoTrans, 2, 2, 2, 0, 1, 4, 4, 3, 2, 2, 2},
	{"mZeroShort", blas.NoTrans, blas.NoTrans, 0, 2, 2, 1, 0, 0, 0, 0, 2, 2, 2},
	{"nZeroShort", blas.NoTrans, blas.NoTrans, 2, 0, 2, 1, 0, 0, 0, 0, 2, 1, 1},
	{"kZeroScale", blas.NoTrans, blas.NoTrans, 2, 2, 0, 1, 3, 1, 0, 4, 1, 2, 2},
	{"alphaZeroBetaOne", blas.NoTrans, blas.NoTrans, 2, 2, 2, 0, 1, 4, 4, 4, 2, 2, 2},
	{"alphaZeroScale", blas.Trans, blas.Trans, 2, 2, 2, 0, -2, 4, 4, 4, 2, 2, 2},
}

// Invalid checks that g panics exactly as gonum's Dgemm does (same panic
// value, or no panic) for negative sizes, bad transposes, short slices and
// too small leading dimensions, and that calls gonum accepts leave C as
// gonum leaves it.
func Invalid(t *testing.T, g kernels.Gemm) {
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			wantC, want := run(gonum.Implementation{}.Dgemm, c)
			gotC, got := run(g.Dgemm, c)
			if got != want {
				t.Fatalf("panic %v, gonum panics %v", got, want)
			}
			for i := range wantC {
				if gotC[i] != wantC[i] {
					t.Fatalf("C = %v, gonum gives %v", gotC, wantC)
				}
			}
		})
	}
}

// run calls f on fresh operands for c and returns C and the recovered panic
// value (nil when f returned).
func run(f func(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int), c call) (cc []float64, p any) {
	seq := func(l int) []float64 {
		s := make([]float64, l)
		for i := range s {
			s[i] = float64(i + 1)
		}
		return s
	}
	cc = seq(c.lc)
	defer func() { p = recover() }()
	f(c.tA, c.tB, c.m, c.n, c.k, c.alpha, seq(c.la), c.lda, seq(c.lb), c.ldb, c.beta, cc, c.ldc)
	return cc, nil
}
