package cublas

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// Matrix is a dense row-major rows×cols float64 matrix resident in device
// memory, owned by the Kernel that created it. It stays on the device across
// calls until Free or the kernel's Close: upload once with Upload, multiply
// many times with Kernel.Gemm, download once with Download. All operations
// on a kernel's matrices run in order on its compute stream.
type Matrix struct {
	g          *Kernel
	ptr        uintptr
	rows, cols int
}

// NewMatrix allocates an uninitialized rows×cols matrix on g's device.
func (g *Kernel) NewMatrix(rows, cols int) (*Matrix, error) {
	mat := &Matrix{g: g, rows: rows, cols: cols}
	err := g.create("NewMatrix", rows, cols, func() error {
		if err := lib.check(lib.malloc(&mat.ptr, uintptr(rows*cols*8))); err != nil {
			return fmt.Errorf("cudaMalloc(%d bytes): %w", rows*cols*8, err)
		}
		g.matrices[mat] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mat, nil
}

// create checks the sizes of a rows×cols object that op makes on the device, then runs
// build on g's device thread under g's lock, unless g is closed. build registers the object
// with g when it succeeds, and frees what it allocated when it fails.
func (g *Kernel) create(op string, rows, cols int, build func() error) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("cublas: %s(%d, %d): sizes must be positive", op, rows, cols)
	}
	checkInt32(rows, cols)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errClosed
	}
	return g.on(build)
}

// Rows returns the number of rows.
func (mat *Matrix) Rows() int { return mat.rows }

// Cols returns the number of columns.
func (mat *Matrix) Cols() int { return mat.cols }

// Free releases the device memory, after the work queued on it completes.
func (mat *Matrix) Free() error {
	g := mat.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.matrices[mat]; !ok {
		return fmt.Errorf("cublas: Matrix already freed")
	}
	delete(g.matrices, mat)
	return g.on(func() error { return lib.check(lib.free(mat.ptr)) })
}

// host describes src or dst as a host block and checks its length.
func (mat *Matrix) host(s []float64, ld int, op string) (hostMat, error) {
	if ld < mat.cols {
		return hostMat{}, fmt.Errorf("cublas: %s: ld %d < cols %d", op, ld, mat.cols)
	}
	if need := (mat.rows-1)*ld + mat.cols; len(s) < need {
		return hostMat{}, fmt.Errorf("cublas: %s: slice length %d < %d", op, len(s), need)
	}
	return hostMat{s, ld, mat.rows, mat.cols}, nil
}

// Upload copies the row-major host matrix src (leading dimension ld >=
// Cols) to the device, after the work already queued, and returns when src
// may be reused. Pinned src (AllocHost, RegisterHost) is copied by DMA
// directly.
func (mat *Matrix) Upload(src []float64, ld int) error {
	h, err := mat.host(src, ld, "Upload")
	if err != nil {
		return err
	}
	return mat.g.transfer(mat, func(g *Kernel) error { return g.h2d(devMat{mat.ptr, mat.cols}, h, g.sComp) })
}

// Download waits for the work queued on the kernel, copies the matrix into
// the row-major host matrix dst (leading dimension ld >= Cols), and returns
// when dst holds it.
func (mat *Matrix) Download(dst []float64, ld int) error {
	h, err := mat.host(dst, ld, "Download")
	if err != nil {
		return err
	}
	return mat.g.transfer(mat, func(g *Kernel) error { return g.d2h(h, devMat{mat.ptr, mat.cols}, g.sComp) })
}

// transfer runs f on the compute stream and waits for it.
func (g *Kernel) transfer(mat *Matrix, f func(*Kernel) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.matrices[mat]; !ok || g.closed {
		return fmt.Errorf("cublas: Matrix freed or kernel closed")
	}
	return g.on(func() error {
		err := f(g)
		if e := lib.check(lib.streamSynchronize(g.sComp)); err == nil {
			err = e
		}
		if e := g.drain(); err == nil {
			err = e
		}
		return err
	})
}

// Gemm queues C = alpha*op(A)*op(B) + beta*C on device-resident matrices
// and returns without waiting; Sync or Download waits. op(A) must be m×k,
// op(B) k×n and C m×n (an error otherwise); the three matrices must belong
// to g, and C must not be A or B. Execution errors surface at Sync or
// Download.
func (g *Kernel) Gemm(tA, tB blas.Transpose, alpha float64, a, b *Matrix, beta float64, c *Matrix) error {
	m, k := a.rows, a.cols
	if tA != blas.NoTrans {
		m, k = k, m
	}
	kb, n := b.rows, b.cols
	if tB != blas.NoTrans {
		kb, n = n, kb
	}
	switch {
	case k != kb || c.rows != m || c.cols != n:
		return fmt.Errorf("cublas: Gemm: op(A) %d×%d, op(B) %d×%d, C %d×%d do not match", m, k, kb, n, c.rows, c.cols)
	case c == a || c == b:
		return fmt.Errorf("cublas: Gemm: C aliases an operand")
	case a.g != g || b.g != g || c.g != g:
		return fmt.Errorf("cublas: Gemm: matrix from another Kernel")
	}
	opA, errA := cublasOp(tA)
	opB, errB := cublasOp(tB)
	if errA != nil || errB != nil {
		return fmt.Errorf("cublas: Gemm: %w", StatusInvalidValue)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, mat := range []*Matrix{a, b, c} {
		if _, ok := g.matrices[mat]; !ok || g.closed {
			return fmt.Errorf("cublas: Gemm: Matrix freed or kernel closed")
		}
	}
	return g.on(func() error {
		return g.gemm(opB, opA, n, m, k, alpha, devMat{b.ptr, b.cols}, devMat{a.ptr, a.cols}, beta, devMat{c.ptr, c.cols})
	})
}

// cublasOp maps a blas.Transpose to cublasOperation_t (N = 0, T = 1).
func cublasOp(t blas.Transpose) (int32, error) {
	switch t {
	case blas.NoTrans:
		return 0, nil
	case blas.Trans, blas.ConjTrans:
		return 1, nil
	}
	return 0, fmt.Errorf("illegal transpose %q", rune(t))
}

// Sync waits until all work queued on g (Gemm calls included) has finished
// and returns the first execution error.
func (g *Kernel) Sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errClosed
	}
	return g.on(func() error { return lib.check(lib.streamSynchronize(g.sComp)) })
}
