// Package openblas registers the "openblas" kernel: OpenBLAS's cblas_dgemm
// from libopenblas.so.0 (Debian package libopenblas0), opened at run time
// with github.com/ebitengine/purego. It needs no cgo and no OpenBLAS at build
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
// Arguments are checked with kernels.CheckDgemm before any C call, so
// invalid arguments panic exactly as gonum does and never reach OpenBLAS.
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
// before the tasks start.
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
)

// lib holds the symbols resolved from OpenBLAS.
type lib struct {
	path       string
	dgemm      func(order, tA, tB, m, n, k int32, alpha float64, a *float64, lda int32, b *float64, ldb int32, beta float64, c *float64, ldc int32)
	setThreads func(n int32)
	getThreads func() int32
	config     func() string
	defThreads int
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
	return nil
}

func init() {
	kernels.Register(kernels.Plugin{
		Name:     Name,
		Device:   kernels.CPU,
		Priority: 10,
		Check:    func() error { _, err := load(); return err },
		New:      func() (kernels.Gemm, error) { return New() },
	})
}

// Kernel is the OpenBLAS kernel. Its methods are safe for concurrent use;
// concurrent Dgemm calls share OpenBLAS's single thread pool.
type Kernel struct {
	l *lib
}

var _ kernels.Gemm = (*Kernel)(nil)

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
	for _, v := range [...]int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			panic(fmt.Sprintf("openblas: size or leading dimension %d exceeds int32", v))
		}
	}
	// With k == 0, a and b may be empty: C still gets scaled by beta, but
	// there is no element to point at.
	var pa, pb *float64
	if len(a) > 0 {
		pa = &a[0]
	}
	if len(b) > 0 {
		pb = &b[0]
	}
	g.l.dgemm(cblasRowMajor, cblasOp(tA), cblasOp(tB), int32(m), int32(n), int32(k),
		alpha, pa, int32(lda), pb, int32(ldb), beta, &c[0], int32(ldc))
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
func (g *Kernel) SetThreads(n int) error {
	if n <= 0 {
		n = g.l.defThreads
	}
	g.l.setThreads(int32(min(n, math.MaxInt32)))
	return nil
}

// Library returns the path the library was loaded from and OpenBLAS's
// build configuration string (openblas_get_config).
func (g *Kernel) Library() (path, config string) { return g.l.path, g.l.config() }
