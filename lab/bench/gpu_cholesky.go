package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/examples/cholesky/tiled"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/internal/parallel"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/cublas"
	"github.com/orwl-go/orwl/kernels/openblas"
)

// gpuCholeskyRows measures the Cholesky factorisation of order n on the GPU against
// OpenBLAS on cores threads, rounds times in turn, and returns the rows of figure
// "cholesky" of the gpu table, each with its best time (GFLOP = n³/3):
//
//   - dpotrf-openblas: OpenBLAS's dpotrf on the whole matrix through the openblas plugin
//     (purego), cores threads: the CPU reference;
//   - cusolver-resident: cusolverDnDpotrf once on a device-resident matrix, upload
//     excluded, synchronization included: the GPU reference; cusolver-h2h: upload,
//     cusolverDnDpotrf and download from pinned host memory;
//   - orwl-gpu, twice: the tiled ORWL Cholesky (package tiled, in this process) as one task
//     on the cublas kernel, with the tile size of gpuTileSizes and half of it;
//   - orwl-hybrid: one task on cublas and cores-1 tasks on openblas with one thread each,
//     the tiles dealt as for CPU tasks alone, tiled.DefaultNB(n).
//
// Every measurement factors a freshly generated matrix (tiled.MatrixA) and checks its
// factor's scaled residual against tiled.ResidualBound; an ORWL measurement is one
// tiled.Run of two factorisations, a warm-up and the measured one, of which it keeps the
// fastest and checks the last. The orwl rows are compared with dpotrf-openblas (Ref,
// Ratio) and, in Note, with cusolver-resident; cusolver-resident with dpotrf-openblas,
// cusolver-h2h with cusolver-resident. cores must be at least 2 (the hybrid row has
// cores-1 CPU tasks).
func gpuCholeskyRows(n, rounds, cores int) ([]gpuRow, error) {
	if n < 1 || rounds < 1 || cores < 2 {
		return nil, fmt.Errorf("gpu cholesky: n %d, rounds %d, cores %d: need n >= 1, rounds >= 1 and cores >= 2", n, rounds, cores)
	}
	cpu, err := kernels.GetCholesky(openblas.Name)
	if err != nil {
		return nil, fmt.Errorf("gpu cholesky: %w", err)
	}
	gpu, err := kernels.GetCholesky(cublas.Name)
	if err != nil {
		return nil, fmt.Errorf("gpu cholesky: %w", err)
	}
	gpu.(io.Closer).Close() // the orwl rows get their own
	if c, ok := cpu.(io.Closer); ok {
		defer c.Close()
	}
	solver, err := newRawSolver(n)
	if err != nil {
		return nil, fmt.Errorf("gpu cholesky: cuSOLVER reference: %w", err)
	}
	defer solver.release()

	a := make([]float64, n*n)
	nb, nbHalf := gpuTileSizes(n)
	hybrid := append([]string{cublas.Name}, slices.Repeat([]string{openblas.Name}, cores-1)...)
	hybridNB := tiled.DefaultNB(n)
	type measure struct {
		impl, ref, note string
		run             func(seed uint64) (time.Duration, error)
	}
	ms := []measure{
		{"dpotrf-openblas", "", fmt.Sprintf("OpenBLAS dpotrf through the openblas plugin, %d threads", cores),
			func(seed uint64) (time.Duration, error) { return potrfOpenBLAS(cpu, cores, a, n, seed) }},
		{"cusolver-resident", "dpotrf-openblas", "cusolverDnDpotrf on a device-resident matrix, upload excluded",
			func(seed uint64) (time.Duration, error) { return solver.factor(seed, false) }},
		{"cusolver-h2h", "cusolver-resident", "upload, cusolverDnDpotrf and download, pinned host memory",
			func(seed uint64) (time.Duration, error) { return solver.factor(seed, true) }},
		{"orwl-gpu", "dpotrf-openblas", fmt.Sprintf("1 task on cublas, nb=%d", nb),
			func(seed uint64) (time.Duration, error) { return orwlCholesky(n, nb, []string{cublas.Name}, seed) }},
		{"orwl-gpu", "dpotrf-openblas", fmt.Sprintf("1 task on cublas, nb=%d", nbHalf),
			func(seed uint64) (time.Duration, error) { return orwlCholesky(n, nbHalf, []string{cublas.Name}, seed) }},
		{"orwl-hybrid", "dpotrf-openblas", fmt.Sprintf("cublas:1,openblas, %d tasks (grid %s), openblas 1 thread, nb=%d", cores, tiled.DefaultGrid(cores), hybridNB),
			func(seed uint64) (time.Duration, error) {
				if err := kernels.SetCPUThreads(hybrid, 1); err != nil {
					return 0, err
				}
				return orwlCholesky(n, hybridNB, hybrid, seed)
			}},
	}
	best := make([]time.Duration, len(ms))
	for r := range rounds {
		for i, m := range ms {
			d, err := m.run(uint64(r + 1))
			if err != nil {
				return nil, fmt.Errorf("gpu cholesky: %s n=%d: %w", m.impl, n, err)
			}
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	rows := make([]gpuRow, len(ms))
	byImpl := map[string]gpuRow{}
	for i, m := range ms {
		s := best[i].Seconds()
		rows[i] = gpuRow{Figure: "cholesky", Impl: m.impl, N: n, Seconds: s, GFlops: tiled.Flops(n) / s / 1e9, Ref: m.ref, Note: m.note}
		if _, ok := byImpl[m.impl]; !ok {
			byImpl[m.impl] = rows[i]
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Ref != "" {
			r.Ratio = r.GFlops / byImpl[r.Ref].GFlops
		}
		if r.Ref == "dpotrf-openblas" && r.Impl != "cusolver-resident" {
			r.Note += fmt.Sprintf("; %.3gx cusolver-resident", r.GFlops/byImpl["cusolver-resident"].GFlops)
		}
	}
	return rows, nil
}

// gpuTileSizes returns the tile sizes of the orwl-gpu rows at order n: n/4 within 256 to
// 4096 (at most n), and half of it. One GPU task runs its operations one after the
// other, each moving its tiles between host and device memory through pinned staging (a
// 2048 x 2048 GEMM takes about 0.5 ms on an H100, moving its three 32 MiB tiles a few
// ms), so the time goes in transfers, whose total falls as 1/NB: tiles as large as leave
// four a side to the algorithm, and a row with half of them to show the trend.
func gpuTileSizes(n int) (nb, half int) {
	nb = min(n, 4096, max(256, n/4))
	return nb, max(1, nb/2)
}

// potrfOpenBLAS times k.Dpotrf (the openblas kernel, on threads threads) on a, filled with
// the matrix of seed, and checks the factor.
func potrfOpenBLAS(k kernels.Cholesky, threads int, a []float64, n int, seed uint64) (time.Duration, error) {
	if err := k.SetThreads(threads); err != nil {
		return 0, err
	}
	fillSPD(a, n, seed)
	t0 := time.Now()
	ok := k.Dpotrf(blas.Lower, n, a, n)
	d := time.Since(t0)
	if !ok {
		return 0, errors.New("dpotrf: not positive definite")
	}
	return d, checkFactor(a, n, seed)
}

// orwlCholesky runs the tiled Cholesky in this process, one task per kernel name of names,
// two factorisations, and returns the fastest's time; the last factor must verify.
func orwlCholesky(n, nb int, names []string, seed uint64) (time.Duration, error) {
	res, err := tiled.Run(context.Background(), tiled.Params{N: n, NB: nb, Grid: tiled.DefaultGrid(len(names)), Kernels: names, Reps: 2, Seed: seed})
	switch {
	case err != nil:
		return 0, err
	case res == nil:
		return 0, errors.New("no result: task 0 ran in another process")
	case !res.Verified:
		return 0, fmt.Errorf("the factor did not verify (residual %g)", res.Residual)
	}
	return time.Duration(res.Seconds * float64(time.Second)), nil
}

// fillSPD writes the row-major n×n matrix A of seed (tiled.MatrixA, both triangles) into a.
func fillSPD(a []float64, n int, seed uint64) {
	parallel.Rows(n, 1, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			for j := range n {
				a[i*n+j] = tiled.MatrixA(seed, n, i, j)
			}
		}
	})
}

// checkFactor returns an error unless the lower triangle of the row-major n×n l holds a
// Cholesky factor of the matrix of seed whose scaled residual (tiled.ScaledResidual) is
// below tiled.ResidualBound.
func checkFactor(l []float64, n int, seed uint64) error {
	if r := factorResidual(l, n, seed); !(r < tiled.ResidualBound) {
		return fmt.Errorf("the factor did not verify (residual %g)", r)
	}
	return nil
}

// factorResidual returns tiled.ScaledResidual for the factor L in the lower triangle of
// the row-major n×n l, A the matrix of seed (generated again), x a vector of entries
// uniform in [-1, 1).
func factorResidual(l []float64, n int, seed uint64) float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = summa.Element(seed, 13, 1, 0, i)
	}
	var mu sync.Mutex
	z := make([]float64, n) // Lᵀ·x, summed over the goroutines' rows
	parallel.Rows(n, 1, func(i0, i1 int) {
		part := make([]float64, n)
		for i := i0; i < i1; i++ {
			for j, v := range l[i*n : i*n+i+1] {
				part[j] += v * x[i]
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for j, v := range part {
			z[j] += v
		}
	})
	y, ax := make([]float64, n), make([]float64, n)
	var normA2 float64
	parallel.Rows(n, 1, func(i0, i1 int) { // L·z, A·x and ‖A‖_F²
		var a2 float64
		for i := i0; i < i1; i++ {
			for j, v := range l[i*n : i*n+i+1] {
				y[i] += v * z[j]
			}
			for j := range n {
				aij := tiled.MatrixA(seed, n, i, j)
				ax[i] += aij * x[j]
				a2 += aij * aij
			}
		}
		mu.Lock()
		defer mu.Unlock()
		normA2 += a2
	})
	return tiled.ScaledResidual(ax, y, x, normA2)
}

// rawSolver is the cuSOLVER reference: cusolverDnDpotrf called through purego on the
// legacy default stream, with no plugin code in between, from the libcusolver the cublas
// plugin loads, with the device buffers and pinned host memory of one order n.
type rawSolver struct {
	cuda       *rawCUDA
	handle     uintptr
	n          int
	lwork      int32
	a, work    uintptr        // device: the matrix, the workspace
	info       uintptr        // device: one int
	host       unsafe.Pointer // pinned: the matrix
	destroy    func(h uintptr) int32
	bufferSize func(h uintptr, uplo, n int32, a uintptr, lda int32, lwork *int32) int32
	potrf      func(h uintptr, uplo, n int32, a uintptr, lda int32, work uintptr, lwork int32, info uintptr) int32
}

// cuBLAS's CUBLAS_FILL_MODE_UPPER: the upper triangle of a column-major matrix is the
// lower triangle of the row-major one.
const fillUpperColMajor = 1

// newRawSolver binds cuSOLVER, allocates the buffers of order n and makes a warm-up
// factorisation (cuSOLVER loads its kernels on its first call).
func newRawSolver(n int) (*rawSolver, error) {
	path, err := cublas.SolverLibrary()
	if err != nil {
		return nil, err
	}
	r, err := newRawCUDA()
	if err != nil {
		return nil, err
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	s := &rawSolver{cuda: r, n: n}
	var create func(h *uintptr) int32
	purego.RegisterLibFunc(&create, lib, "cusolverDnCreate")
	purego.RegisterLibFunc(&s.destroy, lib, "cusolverDnDestroy")
	purego.RegisterLibFunc(&s.bufferSize, lib, "cusolverDnDpotrf_bufferSize")
	purego.RegisterLibFunc(&s.potrf, lib, "cusolverDnDpotrf")
	if st := create(&s.handle); st != 0 {
		return nil, fmt.Errorf("cusolverDnCreate: %w", cublas.SolverStatus(st))
	}
	bytes := uintptr(n) * uintptr(n) * 8
	if err := s.alloc(&s.a, bytes); err != nil {
		s.release()
		return nil, err
	}
	if st := s.bufferSize(s.handle, fillUpperColMajor, int32(n), s.a, int32(n), &s.lwork); st != 0 {
		s.release()
		return nil, fmt.Errorf("cusolverDnDpotrf_bufferSize: %w", cublas.SolverStatus(st))
	}
	if err := errors.Join(s.alloc(&s.work, uintptr(max(1, s.lwork))*8), s.alloc(&s.info, 8)); err != nil {
		s.release()
		return nil, err
	}
	if code := r.mallocHost(&s.host, bytes); code != 0 {
		s.release()
		return nil, fmt.Errorf("cudaMallocHost(%d bytes): %w", bytes, cublas.CUDAError(code))
	}
	if _, err := s.factor(0, true); err != nil {
		s.release()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return s, nil
}

// alloc allocates bytes of device memory into *p.
func (s *rawSolver) alloc(p *uintptr, bytes uintptr) error {
	if code := s.cuda.malloc(p, bytes); code != 0 {
		return fmt.Errorf("cudaMalloc(%d bytes): %w", bytes, cublas.CUDAError(code))
	}
	return nil
}

// release frees the buffers and the handle.
func (s *rawSolver) release() {
	for _, p := range []uintptr{s.a, s.work, s.info} {
		if p != 0 {
			s.cuda.free(p)
		}
	}
	if s.host != nil {
		s.cuda.freeHost(s.host)
	}
	if s.handle != 0 {
		s.destroy(s.handle)
	}
}

// factor fills the pinned matrix with the matrix of seed and times its factorisation on
// the device: cusolverDnDpotrf and the synchronization after it, and with transfers the
// upload before and the download after it too. It checks the factor.
func (s *rawSolver) factor(seed uint64, transfers bool) (time.Duration, error) {
	n, r := s.n, s.cuda
	bytes := uintptr(n) * uintptr(n) * 8
	host := unsafe.Slice((*float64)(s.host), n*n)
	fillSPD(host, n, seed)
	check := func(what string, code int32) error {
		if code != 0 {
			return fmt.Errorf("%s: %w", what, cublas.CUDAError(code))
		}
		return nil
	}
	if !transfers {
		if err := check("cudaMemcpy", r.memcpyToDevice(s.a, s.host, bytes, 1)); err != nil {
			return 0, err
		}
	}
	if err := check("cudaDeviceSynchronize", r.synchronize()); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if transfers {
		if err := check("cudaMemcpy", r.memcpyToDevice(s.a, s.host, bytes, 1)); err != nil {
			return 0, err
		}
	}
	if st := s.potrf(s.handle, fillUpperColMajor, int32(n), s.a, int32(n), s.work, s.lwork, s.info); st != 0 {
		return 0, fmt.Errorf("cusolverDnDpotrf: %w", cublas.SolverStatus(st))
	}
	if transfers {
		if err := check("cudaMemcpy", r.memcpyToHost(s.host, s.a, bytes, 2)); err != nil {
			return 0, err
		}
	}
	if err := check("cudaDeviceSynchronize", r.synchronize()); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if !transfers {
		if err := check("cudaMemcpy", r.memcpyToHost(s.host, s.a, bytes, 2)); err != nil {
			return 0, err
		}
	}
	info := new(int32)
	if err := check("cudaMemcpy", r.memcpyToHost(unsafe.Pointer(info), s.info, 4, 2)); err != nil {
		return 0, err
	}
	if *info != 0 {
		return 0, fmt.Errorf("cusolverDnDpotrf: info %d", *info)
	}
	return d, checkFactor(host, n, seed)
}
