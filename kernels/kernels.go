// Package kernels defines the contract between ORWL computations and the
// dense linear-algebra libraries that do the arithmetic inside a critical
// section, and a registry that selects one of them at run time.
//
// A kernel implements [Gemm]: gonum's row-major Dgemm signature
// (gonum.org/v1/gonum/blas), a name, a [Device] kind and a host-thread
// setting. Plugins live in sub-packages and register themselves from their
// init function:
//
//   - kernels/gonum: pure Go, always available, the default ([Default]).
//   - kernels/openblas: libopenblas.so.0 opened at run time (no cgo).
//   - kernels/cublas: libcudart and libcublas opened at run time (no cgo).
//
// Import kernels/all (blank import) to register all three, or import the
// plugin packages you want. A program built with CGO_ENABLED=0 can then call
// [Get]("openblas"), [Get]("cublas") or [Get]([Auto]); a plugin whose library
// or device is missing returns an error that says why instead of failing
// later.
//
// Invalid arguments: every registered kernel panics exactly as gonum's
// implementation (gonum.org/v1/gonum/blas/gonum) does for the same call, with
// the same panic values, in the same order of checks. Plugins that wrap a C
// library call [CheckDgemm] before touching the library, so bad arguments
// never reach C code.
//
// This package must not import any plugin, load any shared library or touch
// a device: it only holds the contract and the registry.
package kernels

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"
)

// Device says where a kernel computes.
type Device int

const (
	// CPU kernels compute on host threads, directly on the caller's slices.
	CPU Device = iota
	// GPU kernels compute on an accelerator; host slices are copied to and
	// from device memory by the kernel.
	GPU
)

// String returns "cpu" or "gpu".
func (d Device) String() string {
	switch d {
	case CPU:
		return "cpu"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("Device(%d)", int(d))
}

// Gemm is the kernel contract.
//
// Dgemm computes C = alpha * op(A) * op(B) + beta * C for row-major matrices,
// with exactly the semantics, argument checks and panic values of
// gonum.org/v1/gonum/blas/gonum.Implementation.Dgemm: op(X) is X or Xᵀ
// (blas.ConjTrans means Trans), op(A) is m×k, op(B) is k×n, C is m×n, and
// lda, ldb, ldc are row strides. When beta is 0, C is not read (NaNs in C do
// not propagate). Dgemm returns when C holds the result. A Gemm value must
// not be used by several goroutines at once unless its package says so;
// call [Get] once per goroutine to get independent values. Kernels that
// hold resources (the cuBLAS kernel: device memory, streams) also implement
// io.Closer; call Close when done with them.
//
// Threads reports the number of host threads one Dgemm call may use.
// SetThreads asks for n host threads per call; n <= 0 restores the kernel's
// default. A kernel that cannot honour the request returns an error wrapping
// [ErrThreads] and keeps its previous setting. The setting may be
// process-wide (OpenBLAS); each plugin documents its scope.
type Gemm interface {
	Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int)
	Name() string
	Device() Device
	Threads() int
	SetThreads(n int) error
}

// Allocator is implemented by kernels that compute faster on host memory
// they allocate themselves (GPU kernels: page-locked memory, which moves to
// and from the device by DMA at full bus speed instead of being staged).
// Programs may type-assert a Gemm to Allocator and allocate their operands
// with it; such memory lives outside the Go heap and must be released with
// Free. Kernels that do not implement it work as well on any slice.
type Allocator interface {
	// Alloc returns n zeroed float64s.
	Alloc(n int) ([]float64, error)
	// Free releases a slice returned by Alloc; it must not be used after.
	Free(s []float64) error
}

// HostPinner is implemented by kernels that move host memory faster once it is
// page-locked (pinned): a GPU kernel then transfers it by DMA at full bus speed instead of
// staging it through host threads. Programs find it by type assertion on a Gemm, as
// io.WriterTo is found on an io.Reader, and any plugin may offer it; a kernel without it
// works as well on any slice.
//
// PinHost page-locks the memory of s, an existing slice (a sub-slice of other memory
// included) that the caller keeps alive and in place until UnpinHost. It only speeds
// things up: on error (no device, memory already pinned, a limit of the system) nothing
// changed and s is used as before. UnpinHost(s) undoes PinHost(s) for the same slice (same
// first element); it must come before the memory is freed or dropped, and returns an error
// for a slice that PinHost did not pin. Pinning belongs to the process's memory, not to
// the kernel value: memory stays pinned after Close of the kernel that pinned it, and
// UnpinHost may be called on any kernel of the same plugin, also after its Close. Both
// methods are safe for concurrent use, also while other kernels compute.
type HostPinner interface {
	PinHost(s []float64) error
	UnpinHost(s []float64) error
}

// Accumulator is implemented by kernels that can keep the result of a chain of products in
// their own memory between calls (a GPU kernel: on the device), so that only the operands
// of each product travel: C = A₁·B₁ + A₂·B₂ + ..., then C copied out once. Programs find it
// by type assertion on a Gemm, as [HostPinner]; a kernel without it does the same with
// Dgemm calls on a host C.
type Accumulator interface {
	// NewAccumulation returns an m×n matrix C held by the kernel, its content undefined
	// until an Add with beta 0. It stays valid, and keeps its memory, until its Close or
	// the kernel's; one goroutine at a time may use it.
	NewAccumulation(m, n int) (Accumulation, error)
}

// Accumulation is an m×n matrix C held by a kernel (see [Accumulator]).
type Accumulation interface {
	// Add computes C = alpha·A·B + beta·C for the row-major m×k matrix A (leading
	// dimension lda) and k×n matrix B (ldb), k >= 1; when beta is 0, C is not read. It may return
	// before the product is computed, but only once a and b are no longer read: the caller
	// may change or release them then. Bad sizes or slices too short return an error that
	// names them, before anything is queued.
	Add(k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64) error
	// Store waits for every product added so far and copies C into the row-major c
	// (leading dimension ldc). C is kept: more products may follow.
	Store(c []float64, ldc int) error
	// Close releases the kernel memory of C and of the operands; it is idempotent.
	Close() error
}

// Names understood by [Get] besides the registered plugin names.
const (
	// Default is the kernel used when no name is given: pure-Go gonum.
	Default = "gonum"
	// Auto selects the available plugin with the highest [Plugin.Priority]
	// (GPU, then OpenBLAS, then gonum).
	Auto = "auto"
)

// Errors returned (wrapped) by the registry and by SetThreads.
var (
	// ErrUnknown: no plugin is registered under the requested name.
	ErrUnknown = errors.New("kernels: unknown kernel")
	// ErrUnavailable: the plugin is registered but cannot run here (library
	// not found, no GPU, ...); the wrapped error gives the reason.
	ErrUnavailable = errors.New("kernels: kernel unavailable")
	// ErrThreads: the kernel cannot use the requested number of threads.
	ErrThreads = errors.New("kernels: thread setting not supported")
)

// Plugin describes a kernel implementation to the registry.
type Plugin struct {
	// Name is the registry key, e.g. "openblas". Lower case, unique.
	Name string
	// Device is the kind of device the kernel computes on.
	Device Device
	// Priority orders plugins for [Auto]: the available plugin with the
	// highest priority wins. gonum uses 0, openblas 10, cublas 20.
	Priority int
	// Check reports whether the plugin can run in this process: nil, or an
	// error saying why not (e.g. which paths were searched for a library).
	// It may load libraries and should cache its result; it must be safe for
	// concurrent use.
	Check func() error
	// New returns a fresh kernel. It is called only after Check returned nil.
	New func() (Gemm, error)
}

var (
	mu      sync.RWMutex
	plugins = map[string]Plugin{}
)

// Register adds a plugin to the registry. Plugin packages call it from their
// init function. It panics if the name is empty, [Auto] or already
// registered, or if Check or New is nil.
func Register(p Plugin) {
	if p.Name == "" || p.Name == Auto || p.Check == nil || p.New == nil {
		panic(fmt.Sprintf("kernels: invalid plugin registration %q", p.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := plugins[p.Name]; dup {
		panic(fmt.Sprintf("kernels: plugin %q registered twice", p.Name))
	}
	plugins[p.Name] = p
}

// Registered returns the registered plugins, highest priority first (ties by
// name), whether or not they are available.
func Registered() []Plugin {
	mu.RLock()
	ps := slices.Collect(maps.Values(plugins))
	mu.RUnlock()
	slices.SortFunc(ps, func(p, q Plugin) int {
		return cmp.Or(cmp.Compare(q.Priority, p.Priority), strings.Compare(p.Name, q.Name))
	})
	return ps
}

// Available returns the names of the registered plugins that can run in this
// process, fastest (highest priority) first. The first name is what [Auto]
// selects.
func Available() []string { return available(func(Plugin) bool { return true }) }

// AvailableOn returns the names of the available plugins that compute on
// device d, fastest first: AvailableOn(CPU)[0] is the fastest CPU kernel.
func AvailableOn(d Device) []string { return available(func(p Plugin) bool { return p.Device == d }) }

func available(keep func(Plugin) bool) []string {
	var names []string
	for _, p := range Registered() {
		if keep(p) && p.Check() == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// Get returns a new kernel by name: a registered plugin name, [Auto], or ""
// (meaning [Default]). Errors wrap [ErrUnknown] (with the list of registered
// names) or [ErrUnavailable] (with the plugin's reason).
func Get(name string) (Gemm, error) {
	if name == "" {
		name = Default
	}
	if name == Auto {
		// The first available plugin in priority order, as Available()[0],
		// without checking (and loading the libraries of) the ones after it.
		name = ""
		for _, p := range Registered() {
			if p.Check() == nil {
				name = p.Name
				break
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%w: auto: no plugin available (%s)", ErrUnavailable, registeredHint())
		}
	}
	mu.RLock()
	p, ok := plugins[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (%s)", ErrUnknown, name, registeredHint())
	}
	err := p.Check()
	var g Gemm
	if err == nil {
		g, err = p.New()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	return g, nil
}

// registeredHint lists the registered names, sorted, and how to register
// all plugins, for error messages.
func registeredHint() string {
	mu.RLock()
	names := slices.Sorted(maps.Keys(plugins))
	mu.RUnlock()
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	return "registered: " + list + "; import github.com/orwl-go/orwl/kernels/all to register all plugins"
}

// SetCPUThreads asks every CPU kernel named in names (each name once) for threads host
// threads per call, as SetThreads does. A program sets this before its tasks get their
// kernels, since the setting may be process-wide (OpenBLAS). A kernel that cannot honour
// the request ([ErrThreads], e.g. gonum, which follows GOMAXPROCS) keeps its setting; the
// first other error, or a name that Get refuses, is returned.
func SetCPUThreads(names []string, threads int) error {
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		g, err := Get(name)
		if err != nil {
			return err
		}
		if g.Device() == CPU {
			err = g.SetThreads(threads)
		}
		if c, ok := g.(interface{ Close() error }); ok {
			c.Close()
		}
		if err != nil && !errors.Is(err, ErrThreads) {
			return err
		}
	}
	return nil
}
