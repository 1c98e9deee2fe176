package cublas

import (
	"fmt"
	"unsafe"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// The Cholesky operations (kernels.Cholesky) on host slices. Each call checks its arguments
// as gonum does (kernels.CheckDpotrf, CheckDtrsm, CheckDsyrk, CheckDtrtri) before any CUDA
// call, uploads its operands (by DMA when pinned, else staged), computes on the compute
// stream with cuBLAS (Dtrsm, Dtrmm, Dsyrk) or cuSOLVER (Dpotrf, Dtrtri), downloads what
// may change, and returns when the host slices hold the result. A result that may change
// only one triangle of a tile is downloaded into a pinned scratch buffer and only that
// triangle is copied out, so the rest of the tile stays bit for bit as it was.
//
// Row-major over column-major: the row-major matrix X read column-major is Xᵀ. So the
// triangle ul of a row-major matrix is the other triangle of the column-major one that
// cuBLAS and cuSOLVER see; a row-major A = L·Lᵀ is, column-major, Uᵀ·U with U = Lᵀ (upper);
// op(A)·X = alpha·B (side Left, B m×n) is Xᵀ·op(A)ᵀ = alpha·Bᵀ, in which Aᵀ is the matrix
// seen, with the same op (side Right, sizes n×m); and op(A)·op(A)ᵀ is op'(Aᵀ)ᵀ·op'(Aᵀ)
// with the other op.

var _ kernels.Cholesky = (*Kernel)(nil)

// cuBLAS enumerations (cublasFillMode_t, cublasSideMode_t, cublasDiagType_t).
const (
	fillLower   = 0
	fillUpper   = 1
	sideLeft    = 0
	sideRight   = 1
	diagNonUnit = 0
	diagUnit    = 1
)

// otherFill returns the column-major fill mode of the row-major triangle ul: the other one.
func otherFill(ul blas.Uplo) int32 {
	if ul == blas.Lower {
		return fillUpper
	}
	return fillLower
}

// cublasDiag maps a (checked) blas.Diag to cublasDiagType_t.
func cublasDiag(d blas.Diag) int32 {
	if d == blas.Unit {
		return diagUnit
	}
	return diagNonUnit
}

// Dpotrf factors the n×n matrix a in place with cusolverDnDpotrf (see kernels.Potrf): it
// uploads a, factors the other triangle of the column-major matrix cuSOLVER sees, and
// copies only the triangle ul back. When A is not positive definite it returns false, and
// a holds cuSOLVER's partial factorisation in that triangle. It panics like gonum on
// invalid arguments, with the loader's error when libcusolver cannot be loaded (see
// loadSolver), and with a CUDAError, Status or SolverStatus (wrapped) when CUDA fails.
func (g *Kernel) Dpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	if !kernels.CheckDpotrf(ul, n, a, lda) {
		return true
	}
	return g.solve("cusolverDnDpotrf", ul, true, true, n, a, lda, func(s *solver, h, dA, dInfo uintptr) error {
		var lwork int32
		if err := solverStatus(s.potrfBufferSize(h, otherFill(ul), int32(n), dA, int32(n), &lwork)); err != nil {
			return fmt.Errorf("cusolverDnDpotrf_bufferSize: %w", err)
		}
		dW, err := g.grow(workSolver, max(1, int(lwork)))
		if err != nil {
			return err
		}
		if err := solverStatus(s.potrf(h, otherFill(ul), int32(n), dA, int32(n), dW, lwork, dInfo)); err != nil {
			return fmt.Errorf("cusolverDnDpotrf: %w", err)
		}
		return nil
	})
}

// Dtrtri inverts the triangle ul of the n×n matrix a in place with cusolverDnXtrtri (see
// kernels.Trtri): as in Dpotrf, it inverts the other triangle of the column-major matrix
// cuSOLVER sees (the inverse of a transpose is the transpose of the inverse) and copies
// only the triangle ul back, without its diagonal when d is blas.Unit. A zero on the
// diagonal is found on the host before any CUDA call: Dtrtri then returns false with a
// unchanged. It panics as Dpotrf does.
func (g *Kernel) Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	if !kernels.CheckDtrtri(ul, d, n, a, lda) {
		return true
	}
	if d == blas.NonUnit {
		for i := range n {
			if a[i*lda+i] == 0 {
				return false
			}
		}
	}
	return g.solve("cusolverDnXtrtri", ul, d == blas.NonUnit, false, n, a, lda, func(s *solver, h, dA, dInfo uintptr) error {
		var devBytes, hostBytes uint64
		if err := solverStatus(s.trtriBufferSize(h, otherFill(ul), cublasDiag(d), int64(n), cudaR64F, dA, int64(n), &devBytes, &hostBytes)); err != nil {
			return fmt.Errorf("cusolverDnXtrtri_bufferSize: %w", err)
		}
		dW, err := g.grow(workSolver, max(1, int((devBytes+7)/8)))
		if err != nil {
			return err
		}
		hW, err := g.pinned(&g.solverHost, max(1, int((hostBytes+7)/8)))
		if err != nil {
			return err
		}
		if err := solverStatus(s.trtri(h, otherFill(ul), cublasDiag(d), int64(n), cudaR64F, dA, int64(n),
			dW, devBytes, unsafe.Pointer(&hW[0]), hostBytes, dInfo)); err != nil {
			return fmt.Errorf("cusolverDnXtrtri: %w", err)
		}
		return nil
	})
}

// solve runs the cuSOLVER routine fn on the n×n matrix a (leading dimension lda) in place,
// as Dpotrf and Dtrtri do: call gets the handle, the uploaded matrix dA and the device int
// dInfo for fn's info, and queues fn's work; the result is brought back and its triangle
// ul, with the diagonal when diag, copied into a when info is 0, or whatever info is when
// partial. A negative info (an argument the kernels' checks let through) panics naming fn;
// any other CUDA failure panics as exec does. It reports whether info is 0.
func (g *Kernel) solve(fn string, ul blas.Uplo, diag, partial bool, n int, a []float64, lda int, call func(s *solver, h, dA, dInfo uintptr) error) bool {
	checkInt32(n, lda)
	s := mustSolver()
	var info int32
	g.exec(func() error {
		h, dA, err := g.solverOn(s, a, lda, n)
		if err != nil {
			return err
		}
		dInfo, err := g.grow(workInfo, 1)
		if err != nil {
			return err
		}
		if err := call(s, h, dA, dInfo); err != nil {
			return err
		}
		return g.downloadScratch(dA, n, dInfo)
	}, func() {
		if info = g.info(n); info == 0 || partial {
			copyTriangle(a, lda, g.scratch, n, ul, diag)
		}
	})
	if info < 0 {
		panic(fmt.Sprintf("cublas: %s rejected argument %d", fn, -info)) // the kernels' Check let a mistake through
	}
	return info == 0
}

// Dtrsm solves op(A)·X = alpha·B or X·op(A) = alpha·B for the m×n matrix B with
// cublasDtrsm (see kernels.Trsm). With alpha 0 it zeroes B on the host, as gonum does,
// without reading A.
func (g *Kernel) Dtrsm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	g.triangular("cublasDtrsm", lib.dtrsm, s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// Dtrmm computes B = alpha·op(A)·B or B = alpha·B·op(A) for the m×n matrix B with
// cublasDtrmm, in place (see kernels.Trmm; gonum checks its arguments as Dtrsm's). With
// alpha 0 it zeroes B on the host, as gonum does, without reading A.
func (g *Kernel) Dtrmm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	inPlace := func(h uintptr, side, uplo, tA, diag, m, n int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32) int32 {
		return lib.dtrmm(h, side, uplo, tA, diag, m, n, alpha, a, lda, b, ldb, b, ldb) // cuBLAS's trmm writes C; C = B
	}
	g.triangular("cublasDtrmm", inPlace, s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// triangularCall is the signature of cublasDtrsm, and of cublasDtrmm with C = B.
type triangularCall func(h uintptr, side, uplo, tA, diag, m, n int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32) int32

// triangular is Dtrsm or Dtrmm: it checks the arguments, uploads A and B, calls call (the
// cuBLAS function name) on their column-major transposes and downloads B.
func (g *Kernel) triangular(name string, call triangularCall, s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	if !kernels.CheckDtrsm(s, ul, tA, d, m, n, a, lda, b, ldb) {
		return
	}
	checkInt32(m, n, lda, ldb)
	if alpha == 0 {
		for i := range m {
			clear(b[i*ldb : i*ldb+n])
		}
		return
	}
	k, side := m, int32(sideRight) // row-major Left is column-major Right
	if s == blas.Right {
		k, side = n, sideLeft
	}
	op, _ := cublasOp(tA) // checked by kernels.CheckDtrsm
	g.exec(func() error {
		dA, err := g.upload(workA, hostMat{a, lda, k, k})
		if err != nil {
			return err
		}
		hostB := hostMat{b, ldb, m, n}
		dB, err := g.upload(workB, hostB)
		if err != nil {
			return err
		}
		if err := status(call(g.handle, side, otherFill(ul), op, cublasDiag(d), int32(n), int32(m), &alpha, dA, int32(k), dB, int32(n))); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return g.d2h(hostB, devMat{dB, n}, g.sComp)
	}, nil)
}

// Dsyrk computes C = alpha·op(A)·op(A)ᵀ + beta·C on the triangle ul of the n×n matrix C
// with cublasDsyrk (see kernels.Syrk); only that triangle is copied back. C is not
// uploaded when beta is 0. With alpha or k 0 it scales the triangle on the host, as gonum
// does, without reading A.
func (g *Kernel) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	if !kernels.CheckDsyrk(ul, t, n, k, a, lda, c, ldc) {
		return
	}
	checkInt32(n, k, lda, ldc)
	if alpha == 0 || k == 0 {
		scaleTriangle(ul, n, beta, c, ldc)
		return
	}
	rows, cols, op := n, k, int32(1) // A·Aᵀ of row-major A is A'ᵀ·A' of the column-major A' = Aᵀ
	if t != blas.NoTrans {
		rows, cols, op = k, n, 0
	}
	g.exec(func() error {
		dA, err := g.upload(workA, hostMat{a, lda, rows, cols})
		if err != nil {
			return err
		}
		dC, err := g.grow(workC, n*n)
		if err != nil {
			return err
		}
		if beta != 0 {
			if err := g.h2d(devMat{dC, n}, hostMat{c, ldc, n, n}, g.sComp); err != nil {
				return err
			}
		}
		if err := status(lib.dsyrk(g.handle, otherFill(ul), op, int32(n), int32(k), &alpha, dA, int32(cols), &beta, dC, int32(n))); err != nil {
			return fmt.Errorf("cublasDsyrk: %w", err)
		}
		return g.downloadScratch(dC, n, 0)
	}, func() { copyTriangle(c, ldc, g.scratch, n, ul, true) })
}

// scaleTriangle multiplies the triangle ul of the n×n matrix c by beta (sets it to 0 when
// beta is 0, ignoring NaNs), as gonum's Dsyrk does when alpha is 0.
func scaleTriangle(ul blas.Uplo, n int, beta float64, c []float64, ldc int) {
	if beta == 1 {
		return
	}
	for i := range n {
		row := c[i*ldc : i*ldc+i+1]
		if ul == blas.Upper {
			row = c[i*ldc+i : i*ldc+n]
		}
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// copyTriangle copies the triangle ul of the compact n×n matrix src into dst (leading
// dimension ld), its diagonal included when diag is true.
func copyTriangle(dst []float64, ld int, src []float64, n int, ul blas.Uplo, diag bool) {
	d := 0
	if !diag {
		d = 1
	}
	for i := range n {
		if ul == blas.Lower {
			copy(dst[i*ld:i*ld+max(0, i+1-d)], src[i*n:])
		} else if j := min(n, i+d); j < n {
			copy(dst[i*ld+j:i*ld+n], src[i*n+j:])
		}
	}
}

// mustSolver returns the loaded cuSOLVER, or panics with the reason it cannot be loaded.
func mustSolver() *solver {
	s, err := loadSolver()
	if err != nil {
		panic(err)
	}
	return s
}

// exec runs queue with g locked, on g's device, then waits for the compute stream and the
// staged transfers and, if all went well, runs done (when not nil), still locked. It
// panics with the first error, or with errClosed on a closed kernel.
func (g *Kernel) exec(queue func() error, done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		panic(errClosed)
	}
	err := g.on(func() error {
		err := queue()
		// Whatever happened, no copy may still target the caller's slices.
		if e := lib.check(lib.streamSynchronize(g.sComp)); err == nil {
			err = e
		}
		if e := g.drain(); err == nil {
			err = e
		}
		return err
	})
	if err != nil {
		panic(err)
	}
	if done != nil {
		done()
	}
}

// solver returns g's cuSOLVER handle, bound to the compute stream, making it on first use.
func (g *Kernel) solver(s *solver) (uintptr, error) {
	if g.solverHandle != 0 {
		return g.solverHandle, nil
	}
	var h uintptr
	if err := solverStatus(s.create(&h)); err != nil {
		return 0, fmt.Errorf("cusolverDnCreate: %w", err)
	}
	g.solverHandle = h // destroyed by Close
	if err := solverStatus(s.setStream(h, g.sComp)); err != nil {
		return 0, fmt.Errorf("cusolverDnSetStream: %w", err)
	}
	return h, nil
}

// solverOn returns g's cuSOLVER handle and, queued for upload into work buffer workA,
// the n×n matrix a (leading dimension lda): what Dpotrf and Dtrtri start with.
func (g *Kernel) solverOn(s *solver, a []float64, lda, n int) (h, dA uintptr, err error) {
	if h, err = g.solver(s); err != nil {
		return 0, 0, err
	}
	dA, err = g.upload(workA, hostMat{a, lda, n, n})
	return h, dA, err
}

// upload queues on the compute stream the copy of the host block h into work buffer i,
// compact (leading dimension h.cols), and returns the buffer.
func (g *Kernel) upload(i int, h hostMat) (uintptr, error) {
	d, err := g.grow(i, h.rows*h.cols)
	if err != nil {
		return 0, err
	}
	return d, g.h2d(devMat{d, h.cols}, h, g.sComp)
}

// pinned returns *buf, page-locked host memory grown to at least n float64s.
func (g *Kernel) pinned(buf *[]float64, n int) ([]float64, error) {
	if len(*buf) >= n {
		return *buf, nil
	}
	if *buf != nil {
		// Earlier calls are complete (exec synchronizes), so the old buffer is free.
		if err := FreeHost(*buf); err != nil {
			return nil, err
		}
		*buf = nil
	}
	s, err := AllocHost(n)
	if err != nil {
		return nil, err
	}
	*buf = s
	return s, nil
}

// downloadScratch queues on the compute stream the copy of the compact n×n device matrix
// d into g.scratch[:n*n] and, when dInfo is not 0, of the int at dInfo into the slot after
// it (see info).
func (g *Kernel) downloadScratch(d uintptr, n int, dInfo uintptr) error {
	s, err := g.pinned(&g.scratch, n*n+1)
	if err != nil {
		return err
	}
	if err := g.d2h(hostMat{s, n, n, n}, devMat{d, n}, g.sComp); err != nil {
		return err
	}
	if dInfo == 0 {
		return nil
	}
	return lib.check(lib.memcpy2DToHost(unsafe.Pointer(&s[n*n]), 4, dInfo, 4, 4, 1, memcpyDeviceToHost, g.sComp))
}

// info returns the cuSOLVER info that downloadScratch(_, n, dInfo) brought back.
func (g *Kernel) info(n int) int32 { return *(*int32)(unsafe.Pointer(&g.scratch[n*n])) }
