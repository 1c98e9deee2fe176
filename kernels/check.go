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
