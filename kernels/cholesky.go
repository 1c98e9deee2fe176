package kernels

import (
	"errors"
	"fmt"
	"io"

	"gonum.org/v1/gonum/blas"
)

// Potrf is the Cholesky factorisation of one matrix.
//
// Dpotrf has the semantics, argument checks and panic values of
// gonum.org/v1/gonum/lapack/gonum.Implementation.Dpotrf (row-major): with
// blas.Lower it overwrites the lower triangle of the n×n matrix a with L such
// that A = L·Lᵀ, with blas.Upper the upper triangle with U such that A = Uᵀ·U;
// the other triangle is neither read nor written. It returns false when A is
// not positive definite; a then holds a partial factorisation.
type Potrf interface {
	Dpotrf(ul blas.Uplo, n int, a []float64, lda int) (ok bool)
}

// Trsm solves triangular systems with several right-hand sides.
//
// Dtrsm has the semantics, argument checks and panic values of
// gonum.org/v1/gonum/blas/gonum.Implementation.Dtrsm (row-major): it
// overwrites the m×n matrix B with X such that op(A)·X = alpha·B (side
// blas.Left, A m×m) or X·op(A) = alpha·B (blas.Right, A n×n), A triangular
// (ul), with a unit diagonal that is not read when d is blas.Unit.
type Trsm interface {
	Dtrsm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int)
}

// Syrk is the symmetric rank-k update.
//
// Dsyrk has the semantics, argument checks and panic values of
// gonum.org/v1/gonum/blas/gonum.Implementation.Dsyrk (row-major): it computes
// C = alpha·A·Aᵀ + beta·C (t blas.NoTrans, A n×k) or C = alpha·Aᵀ·A + beta·C
// (blas.Trans, A k×n) on the triangle ul of the n×n matrix C, the other
// triangle untouched. When beta is 0, C is not read.
type Syrk interface {
	Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int)
}

// Trmm multiplies by a triangular matrix.
//
// Dtrmm has the semantics, argument checks and panic values of
// gonum.org/v1/gonum/blas/gonum.Implementation.Dtrmm (row-major): it
// overwrites the m×n matrix B with alpha·op(A)·B (side blas.Left, A m×m) or
// alpha·B·op(A) (blas.Right, A n×n), A triangular (ul), with a unit diagonal
// that is not read when d is blas.Unit.
type Trmm interface {
	Dtrmm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int)
}

// Trtri inverts a triangular matrix.
//
// Dtrtri has the semantics, argument checks and panic values of
// gonum.org/v1/gonum/lapack/gonum.Implementation.Dtrtri (row-major): it
// overwrites the triangle ul of the n×n matrix a with the same triangle of
// its inverse (a unit diagonal is neither read nor written when d is
// blas.Unit); the other triangle is neither read nor written. It returns
// false, with a unchanged, when a diagonal entry is exactly zero.
type Trtri interface {
	Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) (ok bool)
}

// Cholesky is a kernel with everything a tiled Cholesky factorisation calls:
// [Gemm] and the optional capabilities [Potrf], [Trsm], [Syrk], [Trmm] and
// [Trtri] (a panel may be solved by multiplying with the inverted diagonal
// tile instead of a triangular solve). The gonum, openblas and cublas plugins
// implement it (openblas only when its library has LAPACK; cublas with cuSOLVER
// for Dpotrf and Dtrtri); a kernel that does not still serves Gemm. Get a kernel
// with [Get] and type-assert it, or call [GetCholesky]. The concurrency rules are
// those of Gemm.
type Cholesky interface {
	Gemm
	Potrf
	Trsm
	Syrk
	Trmm
	Trtri
}

// ErrUnsupported is returned (wrapped) by [GetCholesky] for a kernel that
// lacks one of the methods asked for.
var ErrUnsupported = errors.New("kernels: operation not supported by kernel")

// GetCholesky returns a new kernel by name, as [Get] does, when it implements
// [Cholesky]; otherwise an error wrapping [ErrUnsupported] (the kernel, if it
// held resources, is closed) or Get's error.
func GetCholesky(name string) (Cholesky, error) {
	g, err := Get(name)
	if err != nil {
		return nil, err
	}
	if c, ok := g.(Cholesky); ok {
		return c, nil
	}
	if c, ok := g.(io.Closer); ok {
		c.Close()
	}
	return nil, fmt.Errorf("%w: %s has no Dpotrf, Dtrsm, Dsyrk, Dtrmm and Dtrtri", ErrUnsupported, g.Name())
}
