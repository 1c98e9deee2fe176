// Package gonum registers the "gonum" kernel: gonum's pure-Go BLAS and LAPACK
// (gonum.org/v1/gonum/blas/gonum, gonum.org/v1/gonum/lapack/gonum) behind the
// kernels.Gemm and kernels.Cholesky contracts. It is always available and is
// kernels.Default.
//
// The wrapper must add nothing measurable: every method forwards its arguments
// unchanged, so argument checks and panics are gonum's own.
package gonum

import (
	"fmt"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	lapack "gonum.org/v1/gonum/lapack/gonum"

	"github.com/orwl-go/orwl/kernels"
)

// Name is the registry name of this plugin.
const Name = "gonum"

func init() {
	kernels.Register(kernels.Plugin{
		Name:     Name,
		Device:   kernels.CPU,
		Priority: 0,
		Check:    func() error { return nil },
		New:      func() (kernels.Gemm, error) { return Kernel{}, nil },
	})
}

// Kernel is the gonum kernel. The zero value is ready to use and safe for
// concurrent use by several goroutines.
//
// Threads: gonum runs up to GOMAXPROCS worker goroutines per call and offers
// no per-call setting, so Threads reports runtime.GOMAXPROCS(0) and
// SetThreads accepts only n <= 0 or n equal to it (set GOMAXPROCS to change
// it for the whole process).
type Kernel struct{}

var _ kernels.Cholesky = Kernel{}

// Dgemm calls gonum's Dgemm with the same arguments (see kernels.Gemm).
func (Kernel) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	gonum.Implementation{}.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Dpotrf calls gonum's Dpotrf with the same arguments (see kernels.Potrf).
func (Kernel) Dpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	return lapack.Implementation{}.Dpotrf(ul, n, a, lda)
}

// Dtrsm calls gonum's Dtrsm with the same arguments (see kernels.Trsm).
func (Kernel) Dtrsm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	gonum.Implementation{}.Dtrsm(s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// Dtrmm calls gonum's Dtrmm with the same arguments (see kernels.Trmm).
func (Kernel) Dtrmm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	gonum.Implementation{}.Dtrmm(s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// Dtrtri calls gonum's Dtrtri with the same arguments (see kernels.Trtri).
func (Kernel) Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	return lapack.Implementation{}.Dtrtri(ul, d, n, a, lda)
}

// Dsyrk calls gonum's Dsyrk with the same arguments (see kernels.Syrk). One case is
// mended: with blas.Lower, a transposed A and beta == 0, gonum 0.17 scales C by 0 instead
// of setting it, so a NaN in C would survive; the triangle is cleared first there.
func (Kernel) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	if beta == 0 && ul == blas.Lower && t != blas.NoTrans && kernels.CheckDsyrk(ul, t, n, k, a, lda, c, ldc) {
		for i := range n {
			clear(c[i*ldc : i*ldc+i+1])
		}
	}
	gonum.Implementation{}.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

// Name returns "gonum".
func (Kernel) Name() string { return Name }

// Device returns kernels.CPU.
func (Kernel) Device() kernels.Device { return kernels.CPU }

// Threads returns runtime.GOMAXPROCS(0), gonum's worker limit.
func (Kernel) Threads() int { return runtime.GOMAXPROCS(0) }

// SetThreads returns nil when n <= 0 or n == runtime.GOMAXPROCS(0), and an
// error wrapping kernels.ErrThreads otherwise: gonum's parallelism follows
// GOMAXPROCS, which is process-wide and left to the program.
func (Kernel) SetThreads(n int) error {
	if p := runtime.GOMAXPROCS(0); n > 0 && n != p {
		return fmt.Errorf("%w: gonum uses GOMAXPROCS (%d) workers; set GOMAXPROCS=%d instead", kernels.ErrThreads, p, n)
	}
	return nil
}
