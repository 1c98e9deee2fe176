package tiled

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// BenchmarkFactorDiagonal compares factorDiagonal on a 512 x 512 tile, with the whole L⁻¹
// and with the inverses of its halves only (what a POTRF operation computes), with the
// kernel's Dpotrf alone (L only), with one OpenBLAS thread.
func BenchmarkFactorDiagonal(b *testing.B) {
	k, err := kernels.GetCholesky("openblas")
	if err != nil {
		b.Skip(err)
	}
	if err := k.SetThreads(1); err != nil {
		b.Fatal(err)
	}
	const n = 512
	spd := make([]float64, n*n)
	for i := range n {
		for j := range n {
			spd[i*n+j] = MatrixA(1, n, i, j)
		}
	}
	a, inv := make([]float64, n*n), make([]float64, n*n)
	for _, whole := range []bool{true, false} {
		b.Run(fmt.Sprintf("factorDiagonal/whole=%v", whole), func(b *testing.B) {
			for b.Loop() {
				copy(a, spd)
				factorDiagonal(k, n, a, inv, n, whole)
			}
		})
	}
	b.Run("Dpotrf", func(b *testing.B) {
		for b.Loop() {
			copy(a, spd)
			k.Dpotrf(blas.Lower, n, a, n)
		}
	})
}
