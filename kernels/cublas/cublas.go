// Package cublas registers the "cublas" kernel: NVIDIA cuBLAS DGEMM on a
// CUDA GPU, with libcudart and libcublas opened at run time through
// github.com/ebitengine/purego. The kernel also implements kernels.Cholesky:
// Dtrsm, Dtrmm and Dsyrk with cuBLAS, Dpotrf and Dtrtri with cuSOLVER
// (cusolverDnDpotrf, cusolverDnXtrtri), whose libcusolver is opened on the
// first call that needs it (see SolverLibrary), so that Dgemm users never need
// it; where it is missing, those two panic with an error naming the paths
// tried. The Cholesky operations work on host slices like Dgemm, one
// synchronous upload, computation and download per call, on the compute
// stream (see cholesky.go). It needs no cgo and no CUDA toolkit at build
// time: a CGO_ENABLED=0 binary runs it wherever the libraries and a GPU are
// present, and reports why not elsewhere (see Load for the library search).
//
// Row-major over column-major: a row-major matrix is its transpose in
// column-major order, so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ by
// calling cublasDgemm with the operands swapped (B first, then A, sizes n, m,
// k). No data is transposed or copied for it.
//
// Four ways to use it, from simplest to fastest:
//
//   - Kernel.Dgemm on host slices (the kernels.Gemm contract): copies op(A),
//     op(B) and C to the device, multiplies, and copies C back before
//     returning. Large calls are pipelined over row panels of C on three
//     CUDA streams (upload, compute, download), so transfers of one panel
//     overlap the computation of another.
//   - Pinned host memory (AllocHost, RegisterHost): transfers from and to it
//     run by DMA at full bus speed; other Go slices are staged through a
//     small ring of pinned buffers by host goroutines, which costs host
//     memory bandwidth: on an H100 host, Go-slice Dgemm at N=8192 runs at
//     about 0.6x of the pinned speed. Allocate operands that are multiplied
//     often with AllocHost (or Kernel.Alloc, kernels.Allocator), or pin
//     them once with RegisterHost (Kernel.PinHost, kernels.HostPinner).
//   - Device-resident matrices (Kernel.NewMatrix, Matrix.Upload,
//     Kernel.Gemm, Matrix.Download): upload once, multiply many times,
//     download once; Kernel.Gemm is asynchronous and costs one cuBLAS call.
//   - Accumulations (Kernel.NewAccumulation, kernels.Accumulator): C stays on
//     the device while a chain of products is added to it, each product's
//     operands uploaded while earlier products compute; C is downloaded once,
//     in chunks overlapped with the last products. SUMMA's steps use it.
//
// Argument checks are kernels.CheckDgemm's (and CheckDpotrf's, CheckDtrsm's,
// CheckDsyrk's and CheckDtrtri's), so invalid arguments panic exactly as gonum
// does, before any CUDA call. Sizes and leading
// dimensions above math.MaxInt32 panic (cuBLAS's 32-bit interface). CUDA and
// cuBLAS failures are errors of type CUDAError and Status (SolverStatus for
// cuSOLVER), with names; Dgemm and the Cholesky operations, whose contracts
// have no error result, panic with them (DgemmErr returns them).
//
// This package must not use cgo, need CUDA at build time, or touch the GPU
// before a kernel or a function of it is used.
package cublas

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// Name is the registry name of this plugin.
const Name = "cublas"

func init() {
	kernels.Register(kernels.Plugin{
		Name:     Name,
		Device:   kernels.GPU,
		Priority: 20,
		Check:    func() error { return Load() },
		New:      func() (kernels.Gemm, error) { return New(0) },
	})
}

// maxPanels bounds the number of row panels of a pipelined Dgemm.
const maxPanels = 16

// maxBlocks bounds the number of blocks B is uploaded in (at most
// maxPanels; a variable so that benchmarks can compare).
var maxBlocks = maxPanels

// panelBytes is the op(A)+C traffic aimed at per panel (a variable so that
// tests can exercise the pipeline on small matrices).
var panelBytes = 32 << 20

// Kernel is a cuBLAS context on one device: a cuBLAS handle, three streams,
// events, device work buffers reused by host-slice calls (grown on
// demand, kept until Close) and pinned staging buffers. Its methods are safe
// for concurrent use but serialized; use one Kernel per goroutine for
// concurrent GPU work. Close releases everything.
type Kernel struct {
	mu                sync.Mutex
	dev               int32
	handle            uintptr
	sUp, sComp, sDown uintptr
	evB, evUp, evComp [maxPanels]uintptr
	work              [numWork]devBuf
	up, down          ring
	solverHandle      uintptr   // cuSOLVER handle, made on first use (Dpotrf, Dtrtri)
	scratch           []float64 // pinned: results to copy in part, and cuSOLVER's info
	solverHost        []float64 // pinned: cuSOLVER's host workspace
	matrices          map[*Matrix]struct{}
	accums            map[*accumulation]struct{}
	closed            bool
}

// Device work buffers (indices of Kernel.work), grown on demand and kept until Close.
const (
	workA      = iota // A of Dgemm and of the Cholesky operations
	workB             // B of Dgemm, Dtrsm, Dtrmm
	workC             // C of Dgemm and Dsyrk
	workSolver        // cuSOLVER's device workspace
	workInfo          // cuSOLVER's info
	numWork
)

// devBuf is a grow-only device allocation.
type devBuf struct {
	ptr   uintptr
	bytes int
}

var (
	_ kernels.Gemm       = (*Kernel)(nil)
	_ kernels.Allocator  = (*Kernel)(nil)
	_ kernels.HostPinner = (*Kernel)(nil)
)

// errClosed is returned (or panicked) when a closed Kernel is used.
var errClosed = errors.New("cublas: kernel closed")

// New creates a Kernel on CUDA device dev (0 is the first GPU), loading the
// libraries first if needed (see Load).
func New(dev int) (*Kernel, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	g := &Kernel{dev: int32(dev), matrices: map[*Matrix]struct{}{}, accums: map[*accumulation]struct{}{}}
	err := g.on(func() error {
		if err := status(lib.create(&g.handle)); err != nil {
			return fmt.Errorf("cublasCreate: %w", err)
		}
		for _, s := range []*uintptr{&g.sUp, &g.sComp, &g.sDown} {
			if err := lib.check(lib.streamCreate(s, streamNonBlocking)); err != nil {
				return fmt.Errorf("cudaStreamCreate: %w", err)
			}
		}
		for _, e := range append(append(ptrs(g.evB[:]), ptrs(g.evUp[:])...), ptrs(g.evComp[:])...) {
			if err := lib.check(lib.eventCreate(e, eventDisableTiming)); err != nil {
				return fmt.Errorf("cudaEventCreate: %w", err)
			}
		}
		return status(lib.setStream(g.handle, g.sComp))
	})
	if err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func ptrs(s []uintptr) []*uintptr {
	p := make([]*uintptr, len(s))
	for i := range s {
		p[i] = &s[i]
	}
	return p
}

// on runs f on a locked OS thread whose current CUDA device is g's (the CUDA
// runtime keeps the current device per thread).
func (g *Kernel) on(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := lib.check(lib.setDevice(g.dev)); err != nil {
		return fmt.Errorf("cudaSetDevice(%d): %w", g.dev, err)
	}
	return f()
}

// Close waits for queued work and releases the handle, streams, events,
// buffers and the kernel's remaining Matrix values and accumulations. Using g afterwards
// returns (or panics with) an error. Close is idempotent.
func (g *Kernel) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.on(func() error {
		var errs []error
		keep := func(code int32) { errs = append(errs, lib.check(code)) }
		for _, s := range []uintptr{g.sUp, g.sComp, g.sDown} {
			if s != 0 {
				keep(lib.streamSynchronize(s))
			}
		}
		errs = append(errs, g.drain())
		for m := range g.matrices {
			keep(lib.free(m.ptr))
		}
		for acc := range g.accums {
			errs = append(errs, acc.release())
		}
		for _, b := range g.work {
			if b.ptr != 0 {
				keep(lib.free(b.ptr))
			}
		}
		for _, h := range [][]float64{g.scratch, g.solverHost} {
			if h != nil {
				errs = append(errs, FreeHost(h))
			}
		}
		for _, r := range []*ring{&g.up, &g.down} {
			for _, s := range r.slots {
				if s.buf != nil {
					errs = append(errs, FreeHost(s.buf))
				}
				if s.ev != 0 {
					keep(lib.eventDestroy(s.ev))
				}
			}
		}
		for _, e := range append(append(g.evB[:], g.evUp[:]...), g.evComp[:]...) {
			if e != 0 {
				keep(lib.eventDestroy(e))
			}
		}
		for _, s := range []uintptr{g.sUp, g.sComp, g.sDown} {
			if s != 0 {
				keep(lib.streamDestroy(s))
			}
		}
		if g.handle != 0 {
			errs = append(errs, status(lib.destroy(g.handle)))
		}
		if g.solverHandle != 0 {
			errs = append(errs, solverStatus(solverLib.destroy(g.solverHandle)))
		}
		return errors.Join(errs...)
	})
}

// Name returns "cublas".
func (g *Kernel) Name() string { return Name }

// Device returns kernels.GPU.
func (g *Kernel) Device() kernels.Device { return kernels.GPU }

// Threads returns 1: one host thread drives the GPU (host goroutines that
// pack staged transfers are not counted).
func (g *Kernel) Threads() int { return 1 }

// SetThreads accepts any n and has no effect: the GPU's parallelism is not a
// host thread count.
func (g *Kernel) SetThreads(n int) error { return nil }

// Dgemm computes C = alpha*op(A)*op(B) + beta*C on the GPU for host slices
// (see kernels.Gemm) and returns when C holds the result. It panics like
// gonum on invalid arguments and with a CUDAError or Status (wrapped) when
// CUDA fails.
func (g *Kernel) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if err := g.DgemmErr(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); err != nil {
		panic(err)
	}
}

// DgemmErr is Dgemm returning CUDA and cuBLAS failures as errors instead of
// panicking. Invalid arguments still panic, as in gonum.
func (g *Kernel) DgemmErr(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if !kernels.CheckDgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return nil
	}
	checkInt32(m, n, k, lda, ldb, ldc)
	if alpha == 0 || k == 0 {
		// C = beta*C: no product, nothing worth a transfer.
		for i := range m {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errClosed
	}
	return g.on(func() error {
		err := g.pipeline(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		// Whatever happened, no copy may still target the caller's slices.
		for _, s := range []uintptr{g.sUp, g.sComp, g.sDown} {
			if e := lib.check(lib.streamSynchronize(s)); err == nil {
				err = e
			}
		}
		if e := g.drain(); err == nil {
			err = e
		}
		return err
	})
}

// checkInt32 panics when a size does not fit cuBLAS's 32-bit interface.
func checkInt32(v ...int) {
	for _, x := range v {
		if x > math.MaxInt32 {
			panic(fmt.Sprintf("cublas: size or leading dimension %d exceeds int32", x))
		}
	}
}

// pipeline runs a checked host-slice Dgemm over row panels of C: panel p's
// upload (op(A) rows, and C rows when beta != 0), product and download run
// on the upload, compute and download streams, ordered by events, so that
// the transfers of one panel overlap the products of others. B is uploaded
// once, in blocks interleaved with the products of panel 0 (see firstPanel),
// so the GPU starts computing after one block rather than after all of B.
func (g *Kernel) pipeline(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	aT, bT := tA != blas.NoTrans, tB != blas.NoTrans
	opA, _ := cublasOp(tA) // checked by kernels.CheckDgemm
	opB, _ := cublasOp(tB)
	// Device copies are compact, in the caller's orientation.
	aCols := k
	if aT {
		aCols = m
	}
	bCols := n
	if bT {
		bCols = k
	}
	dA, err := g.grow(workA, m*k)
	if err != nil {
		return err
	}
	dB, err := g.grow(workB, k*n)
	if err != nil {
		return err
	}
	dC, err := g.grow(workC, m*n)
	if err != nil {
		return err
	}
	devA, devB, devC := devMat{dA, aCols}, devMat{dB, bCols}, devMat{dC, n}

	traffic := (m*k + m*n) * 8
	panels := min(maxPanels, max(1, traffic/panelBytes), m)
	rows := (m + panels - 1) / panels
	// B goes up in blocks after panel 0's op(A), so that the first products
	// start after one block instead of after all of B.
	blocks := min(maxBlocks, max(1, k*n*8/panelBytes))
	for p, i0 := 0, 0; i0 < m; p, i0 = p+1, i0+rows {
		r := min(rows, m-i0)
		// op(A) rows i0..i0+r: stored rows (NoTrans) or columns (Trans).
		panelA := devA.row(i0)
		if aT {
			panelA = devA.ptr + uintptr(i0*8)
			if err := g.h2d(devMat{panelA, m}, hostMat{a[i0:], lda, k, r}, g.sUp); err != nil {
				return err
			}
		} else if err := g.h2d(devMat{panelA, k}, hostMat{a[i0*lda:], lda, r, k}, g.sUp); err != nil {
			return err
		}
		hostC := hostMat{c[i0*ldc:], ldc, r, n}
		panelC := devMat{devC.row(i0), n}
		if beta != 0 {
			if err := g.h2d(panelC, hostC, g.sUp); err != nil {
				return err
			}
		}
		if err := g.record(g.evUp[p], g.sUp, g.sComp); err != nil {
			return err
		}
		var gerr error
		if p == 0 {
			gerr = g.firstPanel(opA, opB, r, n, k, alpha, devMat{panelA, devA.ld}, b, ldb, devB, beta, panelC, blocks)
		} else {
			// Cᵀ(n×r) = op(B)ᵀ(n×k) · op(A)ᵀ(k×r) in column-major terms.
			gerr = g.gemm(opB, opA, n, r, k, alpha, devB, devMat{panelA, devA.ld}, beta, panelC)
		}
		if gerr != nil {
			return gerr
		}
		if err := g.record(g.evComp[p], g.sComp, g.sDown); err != nil {
			return err
		}
		if err := g.d2h(hostC, panelC, g.sDown); err != nil {
			return err
		}
	}
	return nil
}

// firstPanel uploads B (host b, leading dimension ldb) to devB in up to
// blocks contiguous blocks and queues the product of panel 0 (r rows, op(A)
// rows in a) block by block, each product waiting only for its block. With op(B) = Bᵀ a block is a set of rows of B, that is of
// columns of op(B) and of C; with op(B) = B it is a set of rows of B, that is
// a slice of the inner dimension, and the partial products accumulate in C.
func (g *Kernel) firstPanel(opA, opB int32, r, n, k int, alpha float64, a devMat, b []float64, ldb int, devB devMat, beta float64, c devMat, blocks int) error {
	trans := opB != 0
	if trans {
		// Stored B is n×k.
		width := (n + min(blocks, n) - 1) / min(blocks, n)
		for q, j0 := 0, 0; j0 < n; q, j0 = q+1, j0+width {
			w := min(width, n-j0)
			block := devMat{devB.row(j0), k}
			if err := g.h2d(block, hostMat{b[j0*ldb:], ldb, w, k}, g.sUp); err != nil {
				return err
			}
			if err := g.record(g.evB[q], g.sUp, g.sComp); err != nil {
				return err
			}
			if err := g.gemm(opB, opA, w, r, k, alpha, block, a, beta, devMat{c.ptr + uintptr(j0*8), c.ld}); err != nil {
				return err
			}
		}
		return nil
	}
	// Stored B is k×n.
	depth := (k + min(blocks, k) - 1) / min(blocks, k)
	for q, l0 := 0, 0; l0 < k; q, l0 = q+1, l0+depth {
		d := min(depth, k-l0)
		block := devMat{devB.row(l0), n}
		if err := g.h2d(block, hostMat{b[l0*ldb:], ldb, d, n}, g.sUp); err != nil {
			return err
		}
		if err := g.record(g.evB[q], g.sUp, g.sComp); err != nil {
			return err
		}
		// op(A) columns l0..l0+d: stored columns (NoTrans) or rows (Trans).
		part := a.ptr + uintptr(l0*8)
		if opA != 0 {
			part = a.ptr + uintptr(l0*a.ld*8)
		}
		bq := beta
		if l0 > 0 {
			bq = 1
		}
		if err := g.gemm(opB, opA, n, r, d, alpha, block, devMat{part, a.ld}, bq, c); err != nil {
			return err
		}
	}
	return nil
}

// gemm queues on the compute stream the column-major cuBLAS product
// Z(mm×nn) = alpha·opB(X)·opA(Y) + beta·Z, where X, Y and Z are the row-major
// B, A and C read column-major: the transpose identity, B first.
func (g *Kernel) gemm(opB, opA int32, mm, nn, k int, alpha float64, b, a devMat, beta float64, c devMat) error {
	if err := status(lib.dgemm(g.handle, opB, opA, int32(mm), int32(nn), int32(k),
		&alpha, b.ptr, int32(b.ld), a.ptr, int32(a.ld), &beta, c.ptr, int32(c.ld))); err != nil {
		return fmt.Errorf("cublasDgemm: %w", err)
	}
	return nil
}

// record records ev on stream from and makes stream to wait for it.
func (g *Kernel) record(ev, from, to uintptr) error {
	if err := lib.check(lib.eventRecord(ev, from)); err != nil {
		return err
	}
	return lib.check(lib.streamWaitEvent(to, ev, 0))
}

// grow returns work buffer i with room for n float64s.
func (g *Kernel) grow(i, n int) (uintptr, error) {
	b := &g.work[i]
	if b.bytes >= n*8 {
		return b.ptr, nil
	}
	if b.ptr != 0 {
		// Earlier calls are complete (DgemmErr synchronizes), so the old
		// buffer is free.
		if err := lib.check(lib.free(b.ptr)); err != nil {
			return 0, err
		}
		*b = devBuf{}
	}
	if err := lib.check(lib.malloc(&b.ptr, uintptr(n*8))); err != nil {
		return 0, fmt.Errorf("cudaMalloc(%d bytes): %w", n*8, err)
	}
	b.bytes = n * 8
	return b.ptr, nil
}
