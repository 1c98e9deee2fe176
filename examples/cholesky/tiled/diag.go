package tiled

import (
	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// diagonalCut is the order below which factorDiagonal calls Dpotrf and Dtrtri directly:
// OpenBLAS's single-thread dpotrf_ and dtrtri_ run at a fraction of its dtrmm's rate on
// 512 x 512 tiles (18 and 12 against 70 GFLOP/s), so larger tiles are split in halves.
const diagonalCut = 32

// factorDiagonal factors the n x n symmetric positive definite matrix whose lower
// triangle a holds (leading dimension ld), A = L·Lᵀ, and writes the lower triangle of
// L⁻¹ into inv (same leading dimension); the upper triangles are neither read nor written.
// It returns false when A is not positive definite. Recursively, on halves:
//
//	L11, L11⁻¹ from A11;  L21 = A21·L11⁻ᵀ;  A22 -= L21·L21ᵀ;  L22, L22⁻¹ from A22;
//	(L⁻¹)21 = -L22⁻¹·L21·L11⁻¹
//
// which spends its time in Dtrmm and Dsyrk. The products with explicit inverses make the
// error grow with the condition of the diagonal blocks, as the panel's multiplications
// with L(k,k)⁻¹ do; the factorisation's residual check bounds the result.
//
// A GPU kernel (Device kernels.GPU) gets the whole tile in one Dpotrf and one Dtrtri: each
// of its calls moves its operands between host and device memory, which the hundreds of
// small calls of the recursion would repeat, and its library factors and inverts a tile
// at the rate of its products anyway.
func factorDiagonal(k kernels.Cholesky, n int, a, inv []float64, ld int) bool {
	if n <= diagonalCut || k.Device() == kernels.GPU {
		if !k.Dpotrf(blas.Lower, n, a, ld) {
			return false
		}
		for r := range n {
			copy(inv[r*ld:r*ld+r+1], a[r*ld:r*ld+r+1])
		}
		return k.Dtrtri(blas.Lower, blas.NonUnit, n, inv, ld)
	}
	h := n / 2
	a21, a22 := a[h*ld:], a[h*ld+h:]
	i21, i22 := inv[h*ld:], inv[h*ld+h:]
	if !factorDiagonal(k, h, a, inv, ld) {
		return false
	}
	k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, n-h, h, 1, inv, ld, a21, ld)
	k.Dsyrk(blas.Lower, blas.NoTrans, n-h, h, -1, a21, ld, 1, a22, ld)
	if !factorDiagonal(k, n-h, a22, i22, ld) {
		return false
	}
	for r := range n - h {
		copy(i21[r*ld:r*ld+h], a21[r*ld:r*ld+h])
	}
	k.Dtrmm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, n-h, h, -1, inv, ld, i21, ld)
	k.Dtrmm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, n-h, h, 1, i22, ld, i21, ld)
	return true
}
