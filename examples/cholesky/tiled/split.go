package tiled

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// split is a kernel whose products run on two threads: Dgemm, Dsyrk and Dtrmm (from the
// right) cut the rows of the matrix they write in two and compute both parts at once, one
// on a goroutine of its own, each with the kernel's calls; Dsyrk computes the block below
// its upper part with Dgemm. Every row of a Dgemm or Dtrmm is computed by the same calls of
// the kernel, in the same order of the inner dimension, as without the cut, so OpenBLAS
// gives the same bits (TestSplitGivesTheSameBits); Dsyrk may round its entries near the
// diagonal differently. The other methods are the kernel's.
//
// It is what an operation that runs while every other task waits computes on (see
// worker.wide): on a host whose cores are as many as the tasks' kernel threads, the
// cores of the waiting tasks are idle.
type split struct{ kernels.Cholesky }

// minSplitRows is the fewest rows split cuts: a goroutine started on another thread
// costs tens of microseconds, as much as a product of fewer rows of a 512-wide tile saves
// (a 512 x 512 diagonal tile factored in 2.1 ms on one thread, 1.9 ms when its products of
// 256 rows are split, 2.6 ms when those of 128 are too).
const minSplitRows = 256

// cutAlign is the multiple of rows at which split cuts: OpenBLAS computes blocks of as
// many rows as its kernel unrolls (16 at most on x86) with one micro-kernel and the rows
// left over with others, which may round differently; a cut between two blocks leaves
// every row to the micro-kernel it would have had (a cut at row 150 of 301 changed bits).
const cutAlign = 16

// cut returns where split cuts m rows, about at fraction f of them, at a multiple of
// cutAlign.
func cut(m int, f float64) int { return int(float64(m)*f) / cutAlign * cutAlign }

// both runs f and g at once and returns when both have.
func both(f, g func()) {
	var wg sync.WaitGroup
	wg.Go(g)
	f()
	wg.Wait()
}

func (s split) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if tA != blas.NoTrans || m < minSplitRows {
		s.Cholesky.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	h := cut(m, 0.5)
	both(func() { s.Cholesky.Dgemm(tA, tB, h, n, k, alpha, a, lda, b, ldb, beta, c, ldc) },
		func() {
			s.Cholesky.Dgemm(tA, tB, m-h, n, k, alpha, a[h*lda:], lda, b, ldb, beta, c[h*ldc:], ldc)
		})
}

// Dsyrk cuts the lower triangle of C at row r, about n/√2, where the triangle above r and
// what lies below it (a product and a smaller triangle) take as many flops.
func (s split) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	if ul != blas.Lower || t != blas.NoTrans || n < minSplitRows {
		s.Cholesky.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
		return
	}
	r := cut(n, 1/math.Sqrt2)
	both(func() { s.Cholesky.Dsyrk(ul, t, r, k, alpha, a, lda, beta, c, ldc) },
		func() {
			s.Cholesky.Dgemm(blas.NoTrans, blas.Trans, n-r, r, k, alpha, a[r*lda:], lda, a, lda, beta, c[r*ldc:], ldc)
			s.Cholesky.Dsyrk(ul, t, n-r, k, alpha, a[r*lda:], lda, beta, c[r*ldc+r:], ldc)
		})
}

func (s split) Dtrmm(sd blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	if sd != blas.Right || m < minSplitRows {
		s.Cholesky.Dtrmm(sd, ul, tA, d, m, n, alpha, a, lda, b, ldb)
		return
	}
	h := cut(m, 0.5)
	both(func() { s.Cholesky.Dtrmm(sd, ul, tA, d, h, n, alpha, a, lda, b, ldb) },
		func() { s.Cholesky.Dtrmm(sd, ul, tA, d, m-h, n, alpha, a, lda, b[h*ldb:], ldb) })
}
