// Package openblas registers the "openblas" kernel: OpenBLAS's cblas_dgemm,
// cblas_dtrsm, cblas_dsyrk, cblas_dtrmm and LAPACK's dpotrf_ and dtrtri_ from libopenblas.so.0 (Debian
// package libopenblas0), opened at run time with github.com/ebitengine/purego. It needs no cgo and no OpenBLAS at build
// time, so a CGO_ENABLED=0 binary can use it wherever the library is
// installed.
//
// The library is looked up, in order, at the path in the ORWL_OPENBLAS_LIB
// environment variable (if set), then as libopenblas.so.0 and libopenblas.so
// through the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache),
// then in /usr/lib/x86_64-linux-gnu/openblas-pthread and /usr/lib64. When
// none loads, the plugin is unavailable and kernels.Get reports every path
// tried and the loader's errors.
//
// Arguments are checked with kernels.CheckDgemm (CheckDtrsm, also for Dtrmm, which gonum
// checks alike, CheckDsyrk, CheckDpotrf, CheckDtrtri) before any C call, so invalid
// arguments panic exactly as gonum does and never reach OpenBLAS. Dpotrf calls the column-major dpotrf_ on the
// other triangle (a row-major lower triangle is a column-major upper one), as
// Debian's OpenBLAS does not export LAPACKE; Dtrtri does the same with dtrtri_. An
// OpenBLAS built without LAPACK (no dpotrf_ or dtrtri_) still registers, as a kernel with Dgemm only: kernels.GetCholesky
// then says why; the *Kernel of New panics in Dpotrf.
// One extra limit: OpenBLAS (LP64 build) takes 32-bit sizes, so a size or
// leading dimension above math.MaxInt32 panics with "openblas: ... exceeds
// int32"; gonum would accept it.
//
// Threads: OpenBLAS has one thread pool per process. SetThreads calls
// openblas_set_num_threads and so changes the setting of every openblas
// Kernel in the process, not just the receiver. Several ORWL tasks sharing a
// process therefore must not each call SetThreads with their own wish: the
// last call wins for all of them, and tasks calling Dgemm at the same time
// compete for the same pool. Choose the thread count once per process
// (typically cores / concurrently computing tasks, often 1) and set it
// before the tasks start. The threads of the pool, once idle, spin (sched_yield) for
// about 2^28 cycles (OPENBLAS_THREAD_TIMEOUT) before they sleep, taking a core from the
// computation: the plugin ends them when it loads the library and when SetThreads(1)
// is called (blas_thread_shutdown_, where exported), and OpenBLAS starts them again at
// the first call that uses more than one thread.
//
// CPU kernels: when OPENBLAS_CORETYPE is not set, the plugin sets it from the CPU's
// features (SkylakeX with AVX-512, Haswell with AVX2 and FMA) before it loads the library,
// because OpenBLAS builds fall back to slow generic kernels on CPUs they do not recognise.
// Set OPENBLAS_CORETYPE yourself to choose otherwise.
//
// This package must not use cgo or link OpenBLAS at build time.
package openblas

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
)

// Name is the registry name of this plugin.
const Name = "openblas"

// EnvLib names the environment variable that gives an explicit path to the
// OpenBLAS shared library, tried before the default locations.
const EnvLib = "ORWL_OPENBLAS_LIB"

// CBLAS enumeration values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
	cblasUpper    = 121
	cblasLower    = 122
	cblasNonUnit  = 131
	cblasUnit     = 132
	cblasLeft     = 141
	cblasRight    = 142
)

// lib holds the symbols resolved from OpenBLAS.
type lib struct {
	path       string
	dgemm      func(order, tA, tB, m, n, k int32, alpha float64, a *float64, lda int32, b *float64, ldb int32, beta float64, c *float64, ldc int32)
	dtrsm      cblasTriangular
	dsyrk      func(order, uplo, t, n, k int32, alpha float64, a *float64, lda int32, beta float64, c *float64, ldc int32)
	dtrmm      cblasTriangular
	dpotrf     func(uplo *byte, n *int32, a *float64, lda *int32, info *int32, uploLen uintptr) // nil without LAPACK
	dtrtri     func(uplo, diag *byte, n *int32, a *float64, lda *int32, info *int32, uploLen, diagLen uintptr)
	lapackErr  error // why dpotrf and dtrtri are nil
	setThreads func(n int32)
	getThreads func() int32
	shutdown   func() int32 // blas_thread_shutdown_: ends the pool's threads; nil when not exported
	config     func() string
	defThreads int

	// calls is held shared by every call into OpenBLAS and exclusively by SetThreads, so
	// that the pool is never shut down under a call that uses it.
	calls sync.RWMutex
}

var load = sync.OnceValues(func() (*lib, error) {
	chooseCoreType()
	var candidates []string
	if p := os.Getenv(EnvLib); p != "" {
		candidates = append(candidates, p)
	}
	candidates = append(candidates,
		"libopenblas.so.0",
		"libopenblas.so",
		"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
		"/usr/lib64/libopenblas.so.0",
	)
	var errs []string
	for _, path := range candidates {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l := &lib{path: path}
		if err := l.resolve(h); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		l.defThreads = int(l.getThreads())
		l.stopIdle()
		return l, nil
	}
	return nil, fmt.Errorf("libopenblas not found (tried %s; install Debian package libopenblas0 or set %s): %s",
		strings.Join(candidates, ", "), EnvLib, strings.Join(errs, "; "))
})

// resolve binds the needed symbols; a missing symbol is an error instead of
// purego's panic.
func (l *lib) resolve(h uintptr) error {
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cblas_dgemm", &l.dgemm},
		{"cblas_dtrsm", &l.dtrsm},
		{"cblas_dsyrk", &l.dsyrk},
		{"cblas_dtrmm", &l.dtrmm},
		{"openblas_set_num_threads", &l.setThreads},
		{"openblas_get_num_threads", &l.getThreads},
		{"openblas_get_config", &l.config},
	} {
		sym, err := purego.Dlsym(h, s.name)
		if err != nil {
			return err
		}
		purego.RegisterFunc(s.fn, sym)
	}
	if sym, err := purego.Dlsym(h, "blas_thread_shutdown_"); err == nil {
		purego.RegisterFunc(&l.shutdown, sym)
	}
	potrf, err := purego.Dlsym(h, "dpotrf_")
	if err != nil {
		l.lapackErr = fmt.Errorf("%s has no LAPACK (dpotrf_): %w", l.path, err)
		return nil
	}
	trtri, err := purego.Dlsym(h, "dtrtri_")
	if err != nil {
		l.lapackErr = fmt.Errorf("%s has no LAPACK (dtrtri_): %w", l.path, err)
		return nil
	}
	purego.RegisterFunc(&l.dpotrf, potrf)
	purego.RegisterFunc(&l.dtrtri, trtri)
	return nil
}

// stopIdle ends the threads of OpenBLAS's pool, which the library starts when it is
// loaded (and openblas_set_num_threads when it is called) and which then spin, calling
// sched_yield, for about 2^28 cycles (OPENBLAS_THREAD_TIMEOUT) before they sleep: a tenth of
// a second of a core, taken from whatever the process or the machine computes then, even
// when every call runs on one thread. OpenBLAS starts the pool again at the first call that
// uses more than one thread, and at openblas_set_num_threads. It does nothing when the
// library does not export blas_thread_shutdown_. No call may be running (calls held, or no
// Kernel yet).
func (l *lib) stopIdle() {
	if l.shutdown != nil {
		l.shutdown()
	}
}

func init() {
	kernels.Register(kernels.Plugin{
		Name:     Name,
		Device:   kernels.CPU,
		Priority: 10,
		Check:    func() error { _, err := load(); return err },
		New: func() (kernels.Gemm, error) {
			g, err := New()
			if err == nil && g.l.lapackErr != nil {
				return gemmOnly{g}, nil
			}
			return g, err
		},
	})
}

// Kernel is the OpenBLAS kernel. Its methods are safe for concurrent use;
// concurrent Dgemm calls share OpenBLAS's single thread pool.
type Kernel struct {
	l *lib
}

var _ kernels.Cholesky = (*Kernel)(nil)

// gemmOnly is the kernel of an OpenBLAS without LAPACK: it hides the Cholesky operations,
// so that kernels.GetCholesky refuses it.
type gemmOnly struct{ k *Kernel }

func (g gemmOnly) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	g.k.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
func (g gemmOnly) Name() string           { return Name }
func (g gemmOnly) Device() kernels.Device { return kernels.CPU }
func (g gemmOnly) Threads() int           { return g.k.Threads() }
func (g gemmOnly) SetThreads(n int) error { return g.k.SetThreads(n) }

// New loads OpenBLAS (once per process) and returns a kernel, or an error
// listing the paths tried when the library cannot be loaded.
func New() (*Kernel, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	return &Kernel{l: l}, nil
}

// Dgemm computes C = alpha*op(A)*op(B) + beta*C with cblas_dgemm in
// row-major order, after kernels.CheckDgemm (see kernels.Gemm).
func (g *Kernel) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !kernels.CheckDgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	checkInt32(m, n, k, lda, ldb, ldc)
	// With k == 0, a and b may be empty: C still gets scaled by beta, but
	// there is no element to point at.
	var pa, pb *float64
	if len(a) > 0 {
		pa = &a[0]
	}
	if len(b) > 0 {
		pb = &b[0]
	}
	g.l.calls.RLock()
	defer g.l.calls.RUnlock()
	g.l.dgemm(cblasRowMajor, cblasOp(tA), cblasOp(tB), int32(m), int32(n), int32(k),
		alpha, pa, int32(lda), pb, int32(ldb), beta, &c[0], int32(ldc))
}

// checkInt32 panics when a size or leading dimension does not fit OpenBLAS's 32-bit
// integers.
func checkInt32(v ...int) {
	for _, x := range v {
		if x > math.MaxInt32 {
			panic(fmt.Sprintf("openblas: size or leading dimension %d exceeds int32", x))
		}
	}
}

// Dtrsm solves op(A)·X = alpha·B or X·op(A) = alpha·B with cblas_dtrsm in row-major order,
// after kernels.CheckDtrsm (see kernels.Trsm).
func (g *Kernel) Dtrsm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	g.l.calls.RLock()
	defer g.l.calls.RUnlock()
	triangular(g.l.dtrsm, s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// Dtrmm computes B = alpha·op(A)·B or B = alpha·B·op(A) with cblas_dtrmm in row-major
// order, after kernels.CheckDtrsm (gonum checks Dtrmm's arguments as Dtrsm's; see
// kernels.Trmm).
func (g *Kernel) Dtrmm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	g.l.calls.RLock()
	defer g.l.calls.RUnlock()
	triangular(g.l.dtrmm, s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}

// cblasTriangular is the signature of cblas_dtrsm and cblas_dtrmm.
type cblasTriangular func(order, side, uplo, tA, diag, m, n int32, alpha float64, a *float64, lda int32, b *float64, ldb int32)

// triangular checks the arguments of Dtrsm or Dtrmm (kernels.CheckDtrsm: gonum checks both
// alike) and calls f, cblas_dtrsm or cblas_dtrmm, in row-major order.
func triangular(f cblasTriangular, s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	if !kernels.CheckDtrsm(s, ul, tA, d, m, n, a, lda, b, ldb) {
		return
	}
	checkInt32(m, n, lda, ldb)
	side, diag := int32(cblasLeft), int32(cblasNonUnit)
	if s == blas.Right {
		side = cblasRight
	}
	if d == blas.Unit {
		diag = cblasUnit
	}
	f(cblasRowMajor, side, cblasUplo(ul), cblasOp(tA), diag, int32(m), int32(n), alpha, &a[0], int32(lda), &b[0], int32(ldb))
}

// Dsyrk computes C = alpha·op(A)·op(A)ᵀ + beta·C on one triangle with cblas_dsyrk in
// row-major order, after kernels.CheckDsyrk (see kernels.Syrk).
func (g *Kernel) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	if !kernels.CheckDsyrk(ul, t, n, k, a, lda, c, ldc) {
		return
	}
	checkInt32(n, k, lda, ldc)
	var pa *float64
	if len(a) > 0 { // k == 0: C is only scaled
		pa = &a[0]
	}
	g.l.calls.RLock()
	defer g.l.calls.RUnlock()
	g.l.dsyrk(cblasRowMajor, cblasUplo(ul), cblasOp(t), int32(n), int32(k), alpha, pa, int32(lda), beta, &c[0], int32(ldc))
}

// Dpotrf factors the n×n matrix a in place with LAPACK's dpotrf_, after
// kernels.CheckDpotrf (see kernels.Potrf). A row-major triangle is the other triangle of
// the column-major matrix LAPACK sees, so the call names the other one. It panics when the
// library has no LAPACK (see the package comment).
func (g *Kernel) Dpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	if !kernels.CheckDpotrf(ul, n, a, lda) {
		return true
	}
	if g.l.dpotrf == nil {
		panic("openblas: " + g.l.lapackErr.Error())
	}
	checkInt32(n, lda)
	args := &potrfArgs{uplo: 'L', n: int32(n), lda: int32(lda)}
	if ul == blas.Lower {
		args.uplo = 'U'
	}
	g.l.calls.RLock()
	g.l.dpotrf(&args.uplo, &args.n, &a[0], &args.lda, &args.info, 1)
	g.l.calls.RUnlock()
	if args.info < 0 {
		panic(fmt.Sprintf("openblas: dpotrf_ rejected argument %d", -args.info)) // CheckDpotrf let a mistake through
	}
	return args.info == 0
}

// Dtrtri inverts the triangle ul of the n×n matrix a in place with LAPACK's dtrtri_,
// after kernels.CheckDtrtri (see kernels.Trtri). As in Dpotrf, the call names the other
// triangle of the column-major matrix LAPACK sees (the inverse of a transpose is the
// transpose of the inverse). It panics when the library has no LAPACK.
func (g *Kernel) Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	if !kernels.CheckDtrtri(ul, d, n, a, lda) {
		return true
	}
	if g.l.dtrtri == nil {
		panic("openblas: " + g.l.lapackErr.Error())
	}
	checkInt32(n, lda)
	args := &trtriArgs{potrfArgs: potrfArgs{uplo: 'L', n: int32(n), lda: int32(lda)}, diag: 'N'}
	if ul == blas.Lower {
		args.uplo = 'U'
	}
	if d == blas.Unit {
		args.diag = 'U'
	}
	g.l.calls.RLock()
	g.l.dtrtri(&args.uplo, &args.diag, &args.n, &a[0], &args.lda, &args.info, 1, 1)
	g.l.calls.RUnlock()
	if args.info < 0 {
		panic(fmt.Sprintf("openblas: dtrtri_ rejected argument %d", -args.info))
	}
	return args.info == 0
}

// trtriArgs are dtrtri_'s arguments passed by reference.
type trtriArgs struct {
	potrfArgs
	diag byte
}

// potrfArgs are dpotrf_'s arguments passed by reference, on the heap where C may read them.
type potrfArgs struct {
	uplo         byte
	n, lda, info int32
}

// cblasUplo maps a (checked) blas.Uplo to its CBLAS value.
func cblasUplo(ul blas.Uplo) int32 {
	if ul == blas.Upper {
		return cblasUpper
	}
	return cblasLower
}

// cblasOp maps a (checked) blas.Transpose to its CBLAS value.
func cblasOp(t blas.Transpose) int32 {
	if t == blas.NoTrans {
		return cblasNoTrans
	}
	return cblasTrans
}

// Name returns "openblas".
func (g *Kernel) Name() string { return Name }

// Device returns kernels.CPU.
func (g *Kernel) Device() kernels.Device { return kernels.CPU }

// Threads returns openblas_get_num_threads(): the process-wide thread count.
func (g *Kernel) Threads() int { return int(g.l.getThreads()) }

// SetThreads sets OpenBLAS's process-wide thread count with
// openblas_set_num_threads; n <= 0 restores the count OpenBLAS had when it
// was loaded (OPENBLAS_NUM_THREADS or the number of cores). It affects every
// openblas Kernel in the process (see the package comment) and never fails.
// It waits for the calls running in other goroutines to return. With n == 1 it
// also ends the threads of OpenBLAS's pool, which would otherwise spin for a
// tenth of a second taking a core from the computation; OpenBLAS starts them
// again when a later SetThreads asks for more.
func (g *Kernel) SetThreads(n int) error {
	if n <= 0 {
		n = g.l.defThreads
	}
	g.l.calls.Lock()
	defer g.l.calls.Unlock()
	g.l.setThreads(int32(min(n, math.MaxInt32)))
	if n == 1 {
		g.l.stopIdle()
	}
	return nil
}

// Library returns the path the library was loaded from and OpenBLAS's
// build configuration string (openblas_get_config).
func (g *Kernel) Library() (path, config string) { return g.l.path, g.l.config() }
