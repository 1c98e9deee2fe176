package cublas

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// EnvLib names the environment variable holding extra places to look for
// libcudart and libcublas: a colon-separated list of directories (or of
// library files, whose directories are used). They are searched first,
// after the directories passed to Load.
const EnvLib = "ORWL_CUDA_LIB"

// defaultDirs are searched after Load's arguments, EnvLib and LD_LIBRARY_PATH.
var defaultDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}

// majors are the CUDA major versions tried, newest first; cudart and cublas
// must come from the same major version.
var majors = []string{"13", "12"}

// cuda holds the resolved CUDA runtime and cuBLAS entry points. Device
// pointers are uintptr, host pointers unsafe.Pointer.
type cuda struct {
	cudartPath, cublasPath string
	// dirs are the directories searched, in order (libcusolver is looked for there too).
	dirs []string

	getDeviceCount    func(n *int32) int32
	setDevice         func(dev int32) int32
	getDeviceProps    func(prop unsafe.Pointer, dev int32) int32
	getErrorName      func(err int32) string
	getErrorString    func(err int32) string
	malloc            func(p *uintptr, size uintptr) int32
	free              func(p uintptr) int32
	mallocHost        func(p *unsafe.Pointer, size uintptr) int32
	freeHost          func(p unsafe.Pointer) int32
	hostRegister      func(p unsafe.Pointer, size uintptr, flags uint32) int32
	hostUnregister    func(p unsafe.Pointer) int32
	memcpy2DToDevice  func(dst, dpitch uintptr, src unsafe.Pointer, spitch, width, height uintptr, kind int32, stream uintptr) int32
	memcpy2DToHost    func(dst unsafe.Pointer, dpitch, src, spitch, width, height uintptr, kind int32, stream uintptr) int32
	streamCreate      func(s *uintptr, flags uint32) int32
	streamDestroy     func(s uintptr) int32
	streamSynchronize func(s uintptr) int32
	eventCreate       func(e *uintptr, flags uint32) int32
	eventDestroy      func(e uintptr) int32
	eventRecord       func(e, s uintptr) int32
	eventSynchronize  func(e uintptr) int32
	eventQuery        func(e uintptr) int32
	memGetInfo        func(free, total *uintptr) int32
	streamWaitEvent   func(s, e uintptr, flags uint32) int32

	create    func(h *uintptr) int32
	destroy   func(h uintptr) int32
	setStream func(h, s uintptr) int32
	dgemm     func(h uintptr, tA, tB, m, n, k int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32, beta *float64, c uintptr, ldc int32) int32
	dtrsm     func(h uintptr, side, uplo, tA, diag, m, n int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32) int32
	dtrmm     func(h uintptr, side, uplo, tA, diag, m, n int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32, c uintptr, ldc int32) int32
	dsyrk     func(h uintptr, uplo, t, n, k int32, alpha *float64, a uintptr, lda int32, beta *float64, c uintptr, ldc int32) int32
}

// CUDA runtime constants used here.
const (
	memcpyHostToDevice   = 1
	memcpyDeviceToHost   = 2
	streamNonBlocking    = 1
	eventDisableTiming   = 2
	hostRegisterPortable = 1
)

var (
	loadOnce sync.Once
	lib      *cuda
	loadErr  error
	// loaded is lib once its symbols are resolved, for CUDAError.Error,
	// which may run in any goroutine.
	loaded atomic.Pointer[cuda]
)

// Load opens libcudart and libcublas once per process and checks that a
// CUDA device is present. The directories given are searched first, then
// those in ORWL_CUDA_LIB, LD_LIBRARY_PATH, /usr/local/cuda/lib64,
// /usr/local/cuda/targets/x86_64-linux/lib, and finally the dynamic loader's
// default search (ld.so.cache), for libcudart.so.13 with libcublas.so.13,
// then the .12 pair. Only the first call searches: later calls (and every
// other function of this package, which call Load implicitly) return the
// first call's result, so call Load before anything else to add directories.
// The error lists every path tried, or gives the CUDA error (for example
// ErrNoDevice or ErrInsufficientDriver).
func Load(dirs ...string) error {
	loadOnce.Do(func() { lib, loadErr = open(dirs) })
	return loadErr
}

// Libraries returns the paths libcudart and libcublas were loaded from, or
// Load's error.
func Libraries() (cudart, cublas string, err error) {
	if err := Load(); err != nil {
		return "", "", err
	}
	return lib.cudartPath, lib.cublasPath, nil
}

// searchDirs returns the directories to search, in order, without duplicates.
func searchDirs(extra []string) []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(list []string) {
		for _, d := range list {
			if d == "" {
				continue
			}
			if st, err := os.Stat(d); err == nil && !st.IsDir() {
				d = filepath.Dir(d)
			}
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	add(extra)
	add(filepath.SplitList(os.Getenv(EnvLib)))
	add(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")))
	add(defaultDirs)
	return dirs
}

// open finds a matching cudart/cublas pair, resolves the symbols and checks
// for a device.
func open(extra []string) (*cuda, error) {
	var tried []string
	// Absolute paths first, then the bare soname for the loader's search.
	dirs := searchDirs(extra)
	places := append(slices.Clip(dirs), "")
	for _, major := range majors {
		for _, dir := range places {
			rt, bl := "libcudart.so."+major, "libcublas.so."+major
			if dir != "" {
				rt, bl = filepath.Join(dir, rt), filepath.Join(dir, bl)
				if _, err := os.Stat(rt); err != nil {
					tried = append(tried, rt)
					continue
				}
			}
			hrt, err := purego.Dlopen(rt, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s (%v)", rt, err))
				continue
			}
			hbl, err := purego.Dlopen(bl, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s (%v)", bl, err))
				continue
			}
			c := &cuda{cudartPath: rt, cublasPath: bl, dirs: dirs}
			if err := c.resolve(hrt, hbl); err != nil {
				return nil, err
			}
			loaded.Store(c)
			return c, c.probe()
		}
	}
	return nil, fmt.Errorf("CUDA libraries not found (libcudart and libcublas .so.13 or .so.12; set %s to their directory); tried: %s",
		EnvLib, strings.Join(tried, ", "))
}

// resolve binds every symbol; a missing one is an error naming it.
func (c *cuda) resolve(hrt, hbl uintptr) error {
	syms := []struct {
		h    uintptr
		name string
		fn   any
	}{
		{hrt, "cudaGetDeviceCount", &c.getDeviceCount},
		{hrt, "cudaSetDevice", &c.setDevice},
		{hrt, "cudaGetErrorName", &c.getErrorName},
		{hrt, "cudaGetErrorString", &c.getErrorString},
		{hrt, "cudaMalloc", &c.malloc},
		{hrt, "cudaFree", &c.free},
		{hrt, "cudaMallocHost", &c.mallocHost},
		{hrt, "cudaFreeHost", &c.freeHost},
		{hrt, "cudaHostRegister", &c.hostRegister},
		{hrt, "cudaHostUnregister", &c.hostUnregister},
		{hrt, "cudaMemcpy2DAsync", &c.memcpy2DToDevice},
		{hrt, "cudaMemcpy2DAsync", &c.memcpy2DToHost},
		{hrt, "cudaStreamCreateWithFlags", &c.streamCreate},
		{hrt, "cudaStreamDestroy", &c.streamDestroy},
		{hrt, "cudaStreamSynchronize", &c.streamSynchronize},
		{hrt, "cudaEventCreateWithFlags", &c.eventCreate},
		{hrt, "cudaEventDestroy", &c.eventDestroy},
		{hrt, "cudaEventRecord", &c.eventRecord},
		{hrt, "cudaEventSynchronize", &c.eventSynchronize},
		{hrt, "cudaEventQuery", &c.eventQuery},
		{hrt, "cudaMemGetInfo", &c.memGetInfo},
		{hrt, "cudaStreamWaitEvent", &c.streamWaitEvent},
		{hbl, "cublasCreate_v2", &c.create},
		{hbl, "cublasDestroy_v2", &c.destroy},
		{hbl, "cublasSetStream_v2", &c.setStream},
		{hbl, "cublasDgemm_v2", &c.dgemm},
		{hbl, "cublasDtrsm_v2", &c.dtrsm},
		{hbl, "cublasDtrmm_v2", &c.dtrmm},
		{hbl, "cublasDsyrk_v2", &c.dsyrk},
	}
	for _, s := range syms {
		p, err := purego.Dlsym(s.h, s.name)
		if err != nil {
			return fmt.Errorf("cublas: symbol %s missing: %w", s.name, err)
		}
		purego.RegisterFunc(s.fn, p)
	}
	// cudaGetDeviceProperties is versioned (_v2 in CUDA 12); optional.
	for _, name := range []string{"cudaGetDeviceProperties_v2", "cudaGetDeviceProperties"} {
		if p, err := purego.Dlsym(hrt, name); err == nil {
			purego.RegisterFunc(&c.getDeviceProps, p)
			break
		}
	}
	return nil
}

// probe checks that at least one device is usable.
func (c *cuda) probe() error {
	var n int32
	if err := c.check(c.getDeviceCount(&n)); err != nil {
		return fmt.Errorf("cudaGetDeviceCount: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("cudaGetDeviceCount: %w", ErrNoDevice)
	}
	return nil
}

// DeviceCount returns the number of CUDA devices, or Load's error.
func DeviceCount() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var n int32
	if err := lib.check(lib.getDeviceCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceName returns the name of device dev (cudaDeviceProp.name), or an
// error.
func DeviceName(dev int) (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	if lib.getDeviceProps == nil {
		return "", fmt.Errorf("cublas: cudaGetDeviceProperties not found in %s", lib.cudartPath)
	}
	// cudaDeviceProp starts with char name[256]; the buffer is larger than
	// the struct in every CUDA version so far.
	var buf [16384]byte
	if err := lib.check(lib.getDeviceProps(unsafe.Pointer(&buf[0]), int32(dev))); err != nil {
		return "", err
	}
	name := buf[:256]
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	return string(name), nil
}
