package kernelstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	lapack "gonum.org/v1/gonum/lapack/gonum"

	"github.com/orwl-go/orwl/kernels"
)

// Cholesky runs the suite of the Cholesky operations on k: Dpotrf, Dtrsm, Dsyrk, Dtrmm and
// Dtrtri against gonum's results on random inputs (every triangle, side, transpose and diagonal,
// odd and degenerate sizes, tight and padded leading dimensions, several scalars), with
// the parts that must not change checked bit for bit, and InvalidCholesky.
func Cholesky(t *testing.T, k kernels.Cholesky) {
	t.Run("Dpotrf", func(t *testing.T) { Dpotrf(t, k) })
	t.Run("Dtrsm", func(t *testing.T) { Dtrsm(t, k) })
	t.Run("Dsyrk", func(t *testing.T) { Dsyrk(t, k) })
	t.Run("Dtrmm", func(t *testing.T) { Dtrmm(t, k) })
	t.Run("Dtrtri", func(t *testing.T) { Dtrtri(t, k) })
	t.Run("Invalid", func(t *testing.T) { InvalidCholesky(t, k) })
}

// cholSizes are the orders tested, degenerate and odd ones included; 129 is larger than
// the blocks of gonum's and OpenBLAS's blocked algorithms.
var cholSizes = []int{0, 1, 2, 7, 33, 129}

var uplos = []blas.Uplo{blas.Lower, blas.Upper}

// Dpotrf checks k.Dpotrf on random symmetric positive definite matrices against gonum:
// the factor agrees within a bound relative to the matrix's largest entry, the other
// triangle and the padding are untouched, and a matrix that is not positive definite
// returns false.
func Dpotrf(t *testing.T, k kernels.Potrf) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, n := range cholSizes {
		for _, ul := range uplos {
			for _, pad := range []int{0, padding} {
				name := fmt.Sprintf("n%d_%c_pad%d", n, ul, pad)
				a, lda := spd(rnd, n, pad)
				want := append([]float64(nil), a...)
				wantOK := lapack.Implementation{}.Dpotrf(ul, n, want, lda)
				got := append([]float64(nil), a...)
				if ok := k.Dpotrf(ul, n, got, lda); ok != wantOK || !ok {
					t.Fatalf("%s: ok = %v, gonum %v", name, ok, wantOK)
				}
				near(t, name, got, want, a, n, n, lda, 1e-12*float64(n+1))
				otherTriangleKept(t, name, ul, got, a, n, lda)
			}
		}
	}
	t.Run("notPositiveDefinite", func(t *testing.T) {
		for _, ul := range uplos {
			n := 40
			a, lda := spd(rnd, n, 0)
			a[30*lda+30] = -1 // a negative pivot from row 30 on
			if k.Dpotrf(ul, n, a, lda) {
				t.Fatalf("%c: ok for a matrix that is not positive definite", ul)
			}
		}
	})
}

// Dtrsm checks k.Dtrsm against gonum for every side, triangle, transpose and diagonal, on
// well-conditioned triangular matrices, with B's padding and A left untouched.
func Dtrsm(t *testing.T, k kernels.Trsm) {
	triangularOp(t, rand.New(rand.NewPCG(5, 6)), k.Dtrsm, gonum.Implementation{}.Dtrsm)
}

// Dtrmm checks k.Dtrmm against gonum as Dtrsm does k.Dtrsm.
func Dtrmm(t *testing.T, k kernels.Trmm) {
	triangularOp(t, rand.New(rand.NewPCG(9, 10)), k.Dtrmm, gonum.Implementation{}.Dtrmm)
}

// triangularFunc is the signature of Dtrsm and Dtrmm.
type triangularFunc func(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int)

// triCase is one call of a triangular operation.
type triCase struct {
	m, n  int
	s     blas.Side
	ul    blas.Uplo
	tA    blas.Transpose
	d     blas.Diag
	alpha float64
}

// triangularOp checks got against want (gonum's) for every side, triangle, transpose and
// diagonal, on well-conditioned triangular matrices, with B's padding and A left untouched.
func triangularOp(t *testing.T, rnd *rand.Rand, got, want triangularFunc) {
	cs := expand([]triCase{{}}, [][2]int{{0, 3}, {3, 0}, {1, 1}, {7, 33}, {33, 7}, {65, 129}}, func(c triCase, mn [2]int) triCase { c.m, c.n = mn[0], mn[1]; return c })
	cs = expand(cs, []blas.Side{blas.Left, blas.Right}, func(c triCase, s blas.Side) triCase { c.s = s; return c })
	cs = expand(cs, uplos, func(c triCase, ul blas.Uplo) triCase { c.ul = ul; return c })
	cs = expand(cs, []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}, func(c triCase, tA blas.Transpose) triCase { c.tA = tA; return c })
	cs = expand(cs, []blas.Diag{blas.NonUnit, blas.Unit}, func(c triCase, d blas.Diag) triCase { c.d = d; return c })
	cs = expand(cs, []float64{1, -0.5, 0}, func(c triCase, alpha float64) triCase { c.alpha = alpha; return c })
	for _, c := range cs {
		na := c.n
		if c.s == blas.Left {
			na = c.m
		}
		pad := rnd.IntN(2) * padding
		name := fmt.Sprintf("m%d_n%d_%c%c%c%c_a%g_pad%d", c.m, c.n, c.s, c.ul, c.tA, c.d, c.alpha, pad)
		a, lda := triangular(rnd, na, c.ul, c.d, pad)
		b, ldb := store(random(rnd, c.m, c.n), c.m, c.n, false, pad)
		a0 := append([]float64(nil), a...)
		wantB := append([]float64(nil), b...)
		want(c.s, c.ul, c.tA, c.d, c.m, c.n, c.alpha, a, lda, wantB, ldb)
		gotB := append([]float64(nil), b...)
		got(c.s, c.ul, c.tA, c.d, c.m, c.n, c.alpha, a, lda, gotB, ldb)
		unchanged(t, name, "A", a, a0)
		near(t, name, gotB, wantB, b, c.m, c.n, ldb, 1e-12)
	}
}

// Dtrtri checks k.Dtrtri against gonum on well-conditioned triangular matrices of both
// triangles and diagonals: the inverse agrees within a bound relative to its largest
// entry, the other triangle (and a unit diagonal) and the padding are untouched, and a
// matrix with a zero on its diagonal returns false, unchanged.
func Dtrtri(t *testing.T, k kernels.Trtri) {
	rnd := rand.New(rand.NewPCG(11, 12))
	cs := expand([]triCase{{}}, cholSizes, func(c triCase, n int) triCase { c.n = n; return c })
	cs = expand(cs, uplos, func(c triCase, ul blas.Uplo) triCase { c.ul = ul; return c })
	cs = expand(cs, []blas.Diag{blas.NonUnit, blas.Unit}, func(c triCase, d blas.Diag) triCase { c.d = d; return c })
	for _, c := range cs {
		n, ul, d := c.n, c.ul, c.d
		pad := rnd.IntN(2) * padding
		name := fmt.Sprintf("n%d_%c%c_pad%d", n, ul, d, pad)
		a, lda := triangular(rnd, n, ul, d, pad)
		want := append([]float64(nil), a...)
		if !(lapack.Implementation{}).Dtrtri(ul, d, n, want, lda) {
			t.Fatalf("%s: gonum finds the matrix singular", name)
		}
		got := append([]float64(nil), a...)
		if !k.Dtrtri(ul, d, n, got, lda) {
			t.Fatalf("%s: ok = false for a nonsingular matrix", name)
		}
		near(t, name, got, want, a, n, n, lda, 1e-12*float64(n+1))
		otherTriangleKept(t, name, ul, got, a, n, lda)
		for i := range n {
			if d == blas.Unit && !math.IsNaN(got[i*lda+i]) {
				t.Fatalf("%s: unit diagonal [%d][%d] written", name, i, i)
			}
		}
	}
	t.Run("singular", func(t *testing.T) {
		for _, ul := range uplos {
			a, lda := triangular(rnd, 40, ul, blas.NonUnit, 0)
			a[30*lda+30] = 0
			a0 := append([]float64(nil), a...)
			if k.Dtrtri(ul, blas.NonUnit, 40, a, lda) {
				t.Fatalf("%c: ok for a singular matrix", ul)
			}
			unchanged(t, fmt.Sprintf("singular %c", ul), "A", a, a0)
		}
	})
}

// Dsyrk checks k.Dsyrk against a naive product for both triangles and transposes, several
// (alpha, beta) pairs and degenerate sizes: the other triangle and the padding of C are
// untouched, A is not modified, and beta == 0 ignores NaNs in C.
func Dsyrk(t *testing.T, k kernels.Syrk) {
	rnd := rand.New(rand.NewPCG(7, 8))
	type syrkCase struct {
		n, k int
		ul   blas.Uplo
		tr   blas.Transpose
	}
	cs := expand([]syrkCase{{}}, [][2]int{{0, 3}, {1, 1}, {7, 0}, {7, 33}, {33, 7}, {129, 65}}, func(c syrkCase, nk [2]int) syrkCase { c.n, c.k = nk[0], nk[1]; return c })
	cs = expand(cs, uplos, func(c syrkCase, ul blas.Uplo) syrkCase { c.ul = ul; return c })
	cs = expand(cs, []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}, func(c syrkCase, tr blas.Transpose) syrkCase { c.tr = tr; return c })
	for _, c := range cs {
		n, kk := c.n, c.k
		opA := random(rnd, n, kk)
		c0 := random(rnd, n, n)
		prod, abs := naive(opA, transpose(opA, n, kk), n, n, kk)
		for _, ab := range scalars {
			pad := rnd.IntN(2) * padding
			name := fmt.Sprintf("n%d_k%d_%c%c_a%g_b%g_pad%d", n, kk, c.ul, c.tr, ab[0], ab[1], pad)
			a, lda := store(opA, n, kk, c.tr != blas.NoTrans, pad)
			cm, ldc := store(c0, n, n, false, pad)
			want := syrkWant(c.ul, n, ab[0], ab[1], prod, c0, cm, ldc)
			a0 := append([]float64(nil), a...)
			k.Dsyrk(c.ul, c.tr, n, kk, ab[0], a, lda, ab[1], cm, ldc)
			unchanged(t, name, "A", a, a0)
			within(t, name, n, n, func(i, j int) (float64, float64, float64) {
				return cm[i*ldc+j], want[i*ldc+j], math.Abs(ab[0])*abs[i][j] + math.Abs(ab[1]*c0[i][j])
			})
			paddingKept(t, name, cm, n, n, ldc)
		}
	}
}

// syrkWant returns what Dsyrk must leave in c (n×n, leading dimension ldc, holding c0):
// alpha·prod + beta·c0 in the ul triangle, c elsewhere. With beta == 0 it puts NaNs in
// that triangle of c, which Dsyrk must ignore.
func syrkWant(ul blas.Uplo, n int, alpha, beta float64, prod, c0 [][]float64, c []float64, ldc int) []float64 {
	want := append([]float64(nil), c...)
	for i := range n {
		for j := range n {
			if ul == blas.Lower && j > i || ul == blas.Upper && j < i {
				continue
			}
			want[i*ldc+j] = alpha*prod[i][j] + beta*c0[i][j]
			if beta == 0 {
				want[i*ldc+j] = alpha * prod[i][j]
				c[i*ldc+j] = math.NaN()
			}
		}
	}
	return want
}

// within fails the test when an entry of an m×n result is farther from what it should be
// than Tol times its bound; at(i, j) gives the entry, what it should be, and the bound.
func within(t *testing.T, name string, m, n int, at func(i, j int) (got, want, bound float64)) {
	t.Helper()
	for i := range m {
		for j := range n {
			got, want, bound := at(i, j)
			if d := math.Abs(got - want); !(d <= Tol*bound) {
				t.Fatalf("%s: C[%d][%d] = %v, want %v", name, i, j, got, want)
			}
		}
	}
}

// otherTriangleKept fails the test when the triangle of the n×n matrix got opposite to ul
// differs from orig's.
func otherTriangleKept(t *testing.T, name string, ul blas.Uplo, got, orig []float64, n, ld int) {
	t.Helper()
	for i := range n {
		for j := range n {
			if (ul == blas.Lower && j > i || ul == blas.Upper && j < i) && math.Float64bits(got[i*ld+j]) != math.Float64bits(orig[i*ld+j]) {
				t.Fatalf("%s: [%d][%d] outside the triangle modified", name, i, j)
			}
		}
	}
}

// near fails the test unless got and want agree within tol·max(1, max|want|) on the m×n
// matrix of leading dimension ld (NaNs where both have one), and got's padding equals
// orig's.
func near(t *testing.T, name string, got, want, orig []float64, m, n, ld int, tol float64) {
	t.Helper()
	scale := 1.0
	for _, v := range want {
		if !math.IsNaN(v) {
			scale = max(scale, math.Abs(v))
		}
	}
	for i := range m {
		for j := range n {
			g, w := got[i*ld+j], want[i*ld+j]
			if d := math.Abs(g - w); !(d <= tol*scale) && !(g == w) && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("%s: [%d][%d] = %v, gonum %v (error %.3g > %.3g)", name, i, j, g, w, d, tol*scale)
			}
		}
	}
	for i := range got {
		if i%ld >= n && got[i] != orig[i] {
			t.Fatalf("%s: padding [%d][%d] modified", name, i/ld, i%ld)
		}
	}
}

// paddingKept fails the test when the padding columns of the m×n matrix c were written.
func paddingKept(t *testing.T, name string, c []float64, m, n, ld int) {
	t.Helper()
	for i := range c {
		if i%ld >= n && c[i] != sentinel {
			t.Fatalf("%s: padding [%d][%d] = %g, want untouched", name, i/ld, i%ld, c[i])
		}
	}
}

// spd returns a random n×n symmetric positive definite matrix (entries in [-1, 1), n+1
// added to the diagonal) with pad sentinel columns, and its leading dimension.
func spd(rnd *rand.Rand, n, pad int) ([]float64, int) {
	x := random(rnd, n, n)
	for i := range n {
		for j := range i {
			x[j][i] = x[i][j]
		}
		x[i][i] += float64(n + 1)
	}
	return store(x, n, n, false, pad)
}

// triangular returns a random n×n matrix whose triangle ul is well conditioned (diagonal
// in [n+1, n+2), or NaN under blas.Unit, which must not be read) and whose other triangle
// holds NaNs that must not be read either.
func triangular(rnd *rand.Rand, n int, ul blas.Uplo, d blas.Diag, pad int) ([]float64, int) {
	x := random(rnd, n, n)
	for i := range n {
		for j := range n {
			if (ul == blas.Lower && j > i) || (ul == blas.Upper && j < i) {
				x[i][j] = math.NaN()
			}
		}
		x[i][i] += float64(n + 1)
		if d == blas.Unit {
			x[i][i] = math.NaN()
		}
	}
	return store(x, n, n, false, pad)
}

// transpose returns the c×r transpose of the r×c matrix x.
func transpose(x [][]float64, r, c int) [][]float64 {
	y := make([][]float64, c)
	for j := range y {
		y[j] = make([]float64, r)
		for i := range r {
			y[j][i] = x[i][j]
		}
	}
	return y
}

// cholCall is one call of InvalidCholesky: its name and the call on one implementation
// (a Cholesky kernel), on fresh slices.
type cholCall struct {
	name string
	call func(k kernels.Cholesky, a, b []float64)
}

// invalidCholesky lists argument errors of Dpotrf, Dtrsm, Dtrmm, Dtrtri and Dsyrk, and quick returns that
// must not panic, in the spirit of gonum's own tests.
var invalidCholesky = []cholCall{
	{"potrfUplo", func(k kernels.Cholesky, a, _ []float64) { k.Dpotrf('x', 2, a, 2) }},
	{"potrfNNeg", func(k kernels.Cholesky, a, _ []float64) { k.Dpotrf(blas.Lower, -1, a, 2) }},
	{"potrfLda", func(k kernels.Cholesky, a, _ []float64) { k.Dpotrf(blas.Lower, 3, a, 2) }},
	{"potrfShort", func(k kernels.Cholesky, a, _ []float64) { k.Dpotrf(blas.Upper, 3, a[:8], 3) }},
	{"potrfZero", func(k kernels.Cholesky, _, _ []float64) { k.Dpotrf(blas.Upper, 0, nil, 1) }},
	{"trsmSide", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm('x', blas.Lower, blas.NoTrans, blas.NonUnit, 2, 2, 1, a, 2, b, 2)
	}},
	{"trsmUplo", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, 'x', blas.NoTrans, blas.NonUnit, 2, 2, 1, a, 2, b, 2)
	}},
	{"trsmTrans", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, 'x', blas.NonUnit, 2, 2, 1, a, 2, b, 2)
	}},
	{"trsmDiag", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, 'x', 2, 2, 1, a, 2, b, 2)
	}},
	{"trsmMNeg", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.Unit, -1, 2, 1, a, 2, b, 2)
	}},
	{"trsmNNeg", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Right, blas.Lower, blas.NoTrans, blas.Unit, 2, -1, 1, a, 2, b, 2)
	}},
	{"trsmLdaLeft", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, 3, 2, 1, a, 2, b, 2)
	}},
	{"trsmLdaRight", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Right, blas.Upper, blas.Trans, blas.NonUnit, 2, 3, 1, a, 2, b, 3)
	}},
	{"trsmLdb", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, 2, 3, 1, a, 2, b, 2)
	}},
	{"trsmShortA", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, 3, 2, 1, a[:8], 3, b, 2)
	}},
	{"trsmShortB", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, 2, 3, 1, a, 2, b[:5], 3)
	}},
	{"trsmMZeroShort", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrsm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, 0, 2, 1, a[:1], 2, b[:0], 2)
	}},
	{"trmmSide", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrmm('x', blas.Lower, blas.NoTrans, blas.NonUnit, 2, 2, 1, a, 2, b, 2)
	}},
	{"trmmDiag", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrmm(blas.Left, blas.Lower, blas.NoTrans, 'x', 2, 2, 1, a, 2, b, 2)
	}},
	{"trmmLdaRight", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrmm(blas.Right, blas.Upper, blas.Trans, blas.NonUnit, 2, 3, 1, a, 2, b, 3)
	}},
	{"trmmShortB", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrmm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, 2, 3, 1, a, 2, b[:5], 3)
	}},
	{"trmmNZeroShort", func(k kernels.Cholesky, a, b []float64) {
		k.Dtrmm(blas.Left, blas.Upper, blas.Trans, blas.Unit, 2, 0, 1, a[:1], 2, b[:0], 1)
	}},
	{"trtriUplo", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri('x', blas.NonUnit, 2, a, 2) }},
	{"trtriDiag", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri(blas.Lower, 'x', 2, a, 2) }},
	{"trtriNNeg", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri(blas.Lower, blas.Unit, -1, a, 2) }},
	{"trtriLda", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri(blas.Upper, blas.NonUnit, 3, a, 2) }},
	{"trtriShort", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri(blas.Lower, blas.NonUnit, 3, a[:8], 3) }},
	{"trtriZero", func(k kernels.Cholesky, _, _ []float64) { k.Dtrtri(blas.Upper, blas.Unit, 0, nil, 1) }},
	{"trtriSingular", func(k kernels.Cholesky, a, _ []float64) { a[4] = 0; k.Dtrtri(blas.Lower, blas.NonUnit, 3, a, 3) }},
	{"trtriInverse", func(k kernels.Cholesky, a, _ []float64) { k.Dtrtri(blas.Upper, blas.NonUnit, 3, a, 3) }},
	{"syrkUplo", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk('x', blas.NoTrans, 2, 2, 1, a, 2, 0, c, 2) }},
	{"syrkTrans", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, 'x', 2, 2, 1, a, 2, 0, c, 2) }},
	{"syrkNNeg", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, blas.NoTrans, -1, 2, 1, a, 2, 0, c, 2) }},
	{"syrkKNeg", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, blas.NoTrans, 2, -1, 1, a, 2, 0, c, 2) }},
	{"syrkLdaN", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, blas.NoTrans, 2, 3, 1, a, 2, 0, c, 2) }},
	{"syrkLdaT", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Upper, blas.Trans, 3, 2, 1, a, 2, 0, c, 3) }},
	{"syrkLdc", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, blas.NoTrans, 3, 2, 1, a, 2, 0, c, 2) }},
	{"syrkShortA", func(k kernels.Cholesky, a, c []float64) {
		k.Dsyrk(blas.Lower, blas.NoTrans, 3, 3, 1, a[:8], 3, 0, c, 3)
	}},
	{"syrkShortC", func(k kernels.Cholesky, a, c []float64) {
		k.Dsyrk(blas.Lower, blas.NoTrans, 3, 2, 1, a, 2, 0, c[:8], 3)
	}},
	{"syrkKZeroScale", func(k kernels.Cholesky, _, c []float64) { k.Dsyrk(blas.Upper, blas.NoTrans, 3, 0, 1, nil, 1, 2, c, 3) }},
	{"syrkAlphaZero", func(k kernels.Cholesky, a, c []float64) { k.Dsyrk(blas.Lower, blas.Trans, 3, 2, 0, a, 3, 0.5, c, 3) }},
}

// InvalidCholesky checks that k's Dpotrf, Dtrsm, Dtrmm, Dtrtri and Dsyrk panic exactly as gonum's do (same
// panic value, or no panic) for bad triangles, sides, transposes and diagonals, negative
// sizes, too small leading dimensions and short slices, and that the calls gonum accepts
// leave the operands as gonum leaves them.
func InvalidCholesky(t *testing.T, k kernels.Cholesky) {
	for _, c := range invalidCholesky {
		t.Run(c.name, func(t *testing.T) {
			wantA, wantB, want := runCholesky(gonumCholesky{}, c)
			gotA, gotB, got := runCholesky(k, c)
			if got != want {
				t.Fatalf("panic %v, gonum panics %v", got, want)
			}
			for i := range wantA {
				if gotA[i] != wantA[i] || gotB[i] != wantB[i] {
					t.Fatalf("operands %v %v, gonum gives %v %v", gotA, gotB, wantA, wantB)
				}
			}
		})
	}
}

// runCholesky makes c's call on k with fresh operands (a diagonally dominant 3×3 a and a
// sequence b, both with room to spare) and returns them and the recovered panic value.
func runCholesky(k kernels.Cholesky, c cholCall) (a, b []float64, p any) {
	a, b = make([]float64, 9), make([]float64, 9)
	for i := range a {
		a[i], b[i] = float64(i%4)/8, float64(i+1)
	}
	for i := range 3 {
		a[4*i] = 4
	}
	defer func() { p = recover() }()
	c.call(k, a, b)
	return a, b, nil
}

// gonumCholesky is the reference: gonum's own BLAS and LAPACK.
type gonumCholesky struct{ gonum.Implementation }

func (gonumCholesky) Dpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	return lapack.Implementation{}.Dpotrf(ul, n, a, lda)
}
func (gonumCholesky) Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	return lapack.Implementation{}.Dtrtri(ul, d, n, a, lda)
}
func (gonumCholesky) Name() string           { return "gonum-reference" }
func (gonumCholesky) Device() kernels.Device { return kernels.CPU }
func (gonumCholesky) Threads() int           { return 1 }
func (gonumCholesky) SetThreads(int) error   { return nil }
