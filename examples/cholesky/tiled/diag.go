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
// which spends its time in Dtrmm and Dsyrk. With whole false, the last step is left out
// on a CPU kernel above diagonalCut: inv then holds L11⁻¹ and L22⁻¹ only, its block below
// them untouched, which is all solvePanel reads (the two products of (L⁻¹)21 take 30% of
// the time of a 512 x 512 tile, on the critical path). The products with explicit inverses
// make the error grow with the condition of the diagonal blocks, as the panel's
// multiplications with them do; the factorisation's residual check bounds the result.
//
// A GPU kernel (Device kernels.GPU) gets the whole tile in one Dpotrf and one Dtrtri: each
// of its calls moves its operands between host and device memory, which the hundreds of
// small calls of the recursion would repeat, and its library factors and inverts a tile
// at the rate of its products anyway.
func factorDiagonal(k kernels.Cholesky, n int, a, inv []float64, ld int, whole bool) bool {
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
	if !factorDiagonal(k, h, a, inv, ld, true) {
		return false
	}
	k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, n-h, h, 1, inv, ld, a21, ld)
	k.Dsyrk(blas.Lower, blas.NoTrans, n-h, h, -1, a21, ld, 1, a22, ld)
	if !factorDiagonal(k, n-h, a22, i22, ld, true) {
		return false
	}
	if !whole {
		return true
	}
	for r := range n - h {
		copy(i21[r*ld:r*ld+h], a21[r*ld:r*ld+h])
	}
	k.Dtrmm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, n-h, h, -1, inv, ld, i21, ld)
	k.Dtrmm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, n-h, h, 1, i22, ld, i21, ld)
	return true
}

// solvePanel overwrites the m x n matrix c (leading dimension n) with c·L⁻ᵀ, where l holds
// the n x n lower triangular L and inv what factorDiagonal(k', n, l, inv, n, false) wrote
// beside it (both of leading dimension n), on any kernel k'. Above diagonalCut, on the
// columns of its halves:
//
//	X1 = C1·L11⁻ᵀ;  C2 -= X1·L21ᵀ;  X2 = C2·L22⁻ᵀ
//
// two Dtrmm and a Dgemm of as many flops as one Dtrmm with L⁻¹, within a few percent of
// its time, reading only the inverses of the halves; otherwise, or when whole says that
// inv holds the whole L⁻¹ (k' computes on a GPU), one Dtrmm with L⁻¹, one call where a GPU
// kernel moves its operands between host and device memory at each.
func solvePanel(k kernels.Cholesky, m, n int, c, l, inv []float64, whole bool) {
	if whole || n <= diagonalCut {
		k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, inv, n, c, n)
		return
	}
	h := n / 2
	k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, h, 1, inv, n, c, n)
	k.Dgemm(blas.NoTrans, blas.Trans, m, n-h, h, -1, c, n, l[h*n:], n, 1, c[h:], n)
	k.Dtrmm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n-h, 1, inv[h*n+h:], n, c[h:], n)
}
