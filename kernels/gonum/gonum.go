// Package gonum registers the "gonum" kernel: gonum's pure-Go BLAS
// (gonum.org/v1/gonum/blas/gonum) behind the kernels.Gemm contract. It is
// always available and is kernels.Default.
//
// The wrapper must add nothing measurable: Dgemm forwards its arguments
// unchanged, so argument checks and panics are gonum's own.
package gonum

import (
	"fmt"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

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

var _ kernels.Gemm = Kernel{}

// Dgemm calls gonum's Dgemm with the same arguments (see kernels.Gemm).
func (Kernel) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	gonum.Implementation{}.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
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
