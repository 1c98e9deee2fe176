package kernels

import "gonum.org/v1/gonum/blas"

// Panic values of gonum.org/v1/gonum/blas/gonum for Dgemm argument errors.
// CheckDgemm panics with exactly these strings so that every kernel fails
// like gonum does.
const (
	panicBadTranspose = "blas: illegal transpose"
	panicMLT0         = "blas: m < 0"
	panicNLT0         = "blas: n < 0"
	panicKLT0         = "blas: k < 0"
	panicBadLdA       = "blas: bad leading dimension of A"
	panicBadLdB       = "blas: bad leading dimension of B"
	panicBadLdC       = "blas: bad leading dimension of C"
	panicShortA       = "blas: insufficient length of a"
	panicShortB       = "blas: insufficient length of b"
	panicShortC       = "blas: insufficient length of c"
)

// CheckDgemm validates Dgemm arguments exactly as
// gonum.org/v1/gonum/blas/gonum.Implementation.Dgemm does: same checks, same
// order, same panic values (strings such as "blas: bad leading dimension of
// A"). It returns false when gonum would return without touching C (m or n
// is 0, or alpha*op(A)*op(B) is empty or zero and beta is 1), true when the
// call has work to do. Plugins wrapping a C library call it first so that
// invalid arguments never reach C code.
func CheckDgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) bool {
	aTrans, okA := transposed(tA)
	bTrans, okB := transposed(tB)
	switch {
	case !okA, !okB:
		panic(panicBadTranspose)
	case m < 0:
		panic(panicMLT0)
	case n < 0:
		panic(panicNLT0)
	case k < 0:
		panic(panicKLT0)
	case aTrans && lda < max(1, m), !aTrans && lda < max(1, k):
		panic(panicBadLdA)
	case bTrans && ldb < max(1, k), !bTrans && ldb < max(1, n):
		panic(panicBadLdB)
	case ldc < max(1, n):
		panic(panicBadLdC)
	}
	if m == 0 || n == 0 {
		return false
	}
	switch {
	case aTrans && len(a) < (k-1)*lda+m, !aTrans && len(a) < (m-1)*lda+k:
		panic(panicShortA)
	case bTrans && len(b) < (n-1)*ldb+k, !bTrans && len(b) < (k-1)*ldb+n:
		panic(panicShortB)
	case len(c) < (m-1)*ldc+n:
		panic(panicShortC)
	}
	return !((alpha == 0 || k == 0) && beta == 1)
}

// transposed reports whether t transposes its operand (ConjTrans is Trans
// for real matrices) and whether t is a valid blas.Transpose.
func transposed(t blas.Transpose) (trans, ok bool) {
	switch t {
	case blas.NoTrans:
		return false, true
	case blas.Trans, blas.ConjTrans:
		return true, true
	}
	return false, false
}

// Panic values of gonum for the argument errors of Dpotrf (lapack/gonum), Dtrsm and Dsyrk
// (blas/gonum) that Dgemm does not share.
const (
	panicBadUplo     = "blas: illegal triangle"
	panicBadSide     = "blas: illegal side"
	panicBadDiag     = "blas: illegal diagonal"
	panicLapackUplo  = "lapack: bad Uplo"
	panicLapackDiag  = "lapack: bad Diag"
	panicLapackNLT0  = "lapack: n < 0"
	panicLapackLdA   = "lapack: bad leading dimension of A"
	panicLapackShort = "lapack: insufficient length of a"
)

// CheckDpotrf validates Dpotrf arguments exactly as
// gonum.org/v1/gonum/lapack/gonum.Implementation.Dpotrf does (same checks, same order,
// same panic values). It returns false when n is 0 (nothing to do: the factorisation
// succeeds), true otherwise.
func CheckDpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	switch {
	case ul != blas.Upper && ul != blas.Lower:
		panic(panicLapackUplo)
	case n < 0:
		panic(panicLapackNLT0)
	case lda < max(1, n):
		panic(panicLapackLdA)
	}
	if n == 0 {
		return false
	}
	if len(a) < (n-1)*lda+n {
		panic(panicLapackShort)
	}
	return true
}

// CheckDtrsm validates Dtrsm arguments exactly as
// gonum.org/v1/gonum/blas/gonum.Implementation.Dtrsm does. It returns false when m or n is
// 0 (B is not touched), true otherwise.
func CheckDtrsm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, a []float64, lda int, b []float64, ldb int) bool {
	_, okT := transposed(tA)
	switch {
	case s != blas.Left && s != blas.Right:
		panic(panicBadSide)
	case ul != blas.Lower && ul != blas.Upper:
		panic(panicBadUplo)
	case !okT:
		panic(panicBadTranspose)
	case d != blas.NonUnit && d != blas.Unit:
		panic(panicBadDiag)
	case m < 0:
		panic(panicMLT0)
	case n < 0:
		panic(panicNLT0)
	}
	k := n
	if s == blas.Left {
		k = m
	}
	switch {
	case lda < max(1, k):
		panic(panicBadLdA)
	case ldb < max(1, n):
		panic(panicBadLdB)
	}
	if m == 0 || n == 0 {
		return false
	}
	switch {
	case len(a) < lda*(k-1)+k:
		panic(panicShortA)
	case len(b) < ldb*(m-1)+n:
		panic(panicShortB)
	}
	return true
}

// CheckDtrtri validates Dtrtri arguments exactly as
// gonum.org/v1/gonum/lapack/gonum.Implementation.Dtrtri does. It returns false when n is
// 0 (nothing to do: the inversion succeeds), true otherwise.
func CheckDtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	switch {
	case ul != blas.Upper && ul != blas.Lower:
		panic(panicLapackUplo)
	case d != blas.NonUnit && d != blas.Unit:
		panic(panicLapackDiag)
	}
	return CheckDpotrf(ul, n, a, lda) // the same checks, in the same order, from here on
}

// CheckDsyrk validates Dsyrk arguments exactly as
// gonum.org/v1/gonum/blas/gonum.Implementation.Dsyrk does. It returns false when n is 0
// (C is not touched), true otherwise.
func CheckDsyrk(ul blas.Uplo, t blas.Transpose, n, k int, a []float64, lda int, c []float64, ldc int) bool {
	trans, okT := transposed(t)
	switch {
	case ul != blas.Lower && ul != blas.Upper:
		panic(panicBadUplo)
	case !okT:
		panic(panicBadTranspose)
	case n < 0:
		panic(panicNLT0)
	case k < 0:
		panic(panicKLT0)
	}
	row, col := n, k
	if trans {
		row, col = k, n
	}
	switch {
	case lda < max(1, col):
		panic(panicBadLdA)
	case ldc < max(1, n):
		panic(panicBadLdC)
	}
	if n == 0 {
		return false
	}
	switch {
	case len(a) < lda*(row-1)+col:
		panic(panicShortA)
	case len(c) < ldc*(n-1)+n:
		panic(panicShortC)
	}
	return true
}
