package main

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/orwl-go/orwl/internal/parallel"
	"github.com/orwl-go/orwl/kernels/cublas"
)

// rawCUDA is the GPU reference: cuBLAS and the CUDA runtime called directly
// through purego with no plugin code in between, from the same library files
// the plugin loaded. It gives the cost of a bare cublasDgemm loop and of
// pinned-memory transfers.
type rawCUDA struct {
	handle         uintptr
	malloc         func(p *uintptr, size uintptr) int32
	free           func(p uintptr) int32
	mallocHost     func(p *unsafe.Pointer, size uintptr) int32
	freeHost       func(p unsafe.Pointer) int32
	memcpyToDevice func(dst uintptr, src unsafe.Pointer, size uintptr, kind int32) int32
	memcpyToHost   func(dst unsafe.Pointer, src uintptr, size uintptr, kind int32) int32
	synchronize    func() int32
	dgemm          func(h uintptr, tA, tB, m, n, k int32, alpha *float64, a uintptr, lda int32, b uintptr, ldb int32, beta *float64, c uintptr, ldc int32) int32
}

// newRawCUDA binds the reference functions from the plugin's libraries.
func newRawCUDA() (*rawCUDA, error) {
	rtPath, blPath, err := cublas.Libraries()
	if err != nil {
		return nil, err
	}
	rt, err := purego.Dlopen(rtPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	bl, err := purego.Dlopen(blPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	r := &rawCUDA{}
	purego.RegisterLibFunc(&r.malloc, rt, "cudaMalloc")
	purego.RegisterLibFunc(&r.free, rt, "cudaFree")
	purego.RegisterLibFunc(&r.mallocHost, rt, "cudaMallocHost")
	purego.RegisterLibFunc(&r.freeHost, rt, "cudaFreeHost")
	purego.RegisterLibFunc(&r.memcpyToDevice, rt, "cudaMemcpy")
	purego.RegisterLibFunc(&r.memcpyToHost, rt, "cudaMemcpy")
	purego.RegisterLibFunc(&r.synchronize, rt, "cudaDeviceSynchronize")
	purego.RegisterLibFunc(&r.dgemm, bl, "cublasDgemm_v2")
	var create func(h *uintptr) int32
	purego.RegisterLibFunc(&create, bl, "cublasCreate_v2")
	if st := create(&r.handle); st != 0 {
		return nil, fmt.Errorf("cublasCreate: status %d", st)
	}
	return r, nil
}

// rawBufs are the device and pinned host buffers of one size.
type rawBufs struct {
	n       int
	a, b, c uintptr        // device
	host    unsafe.Pointer // pinned, 3 n×n matrices
}

func (r *rawCUDA) alloc(n int) (*rawBufs, error) {
	bytes := uintptr(n * n * 8)
	bufs := &rawBufs{n: n}
	for _, p := range []*uintptr{&bufs.a, &bufs.b, &bufs.c} {
		if code := r.malloc(p, bytes); code != 0 {
			r.release(bufs)
			return nil, fmt.Errorf("cudaMalloc: %w", cublas.CUDAError(code))
		}
	}
	if code := r.mallocHost(&bufs.host, 3*bytes); code != 0 {
		r.release(bufs)
		return nil, fmt.Errorf("cudaMallocHost: %w", cublas.CUDAError(code))
	}
	h := unsafe.Slice((*float64)(bufs.host), 3*n*n)
	parallel.Rows(len(h), 1<<20, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			h[i] = float64(i%17)/17 - 0.5
		}
	})
	// Device operands get defined values.
	if err := r.upload(bufs); err != nil {
		r.release(bufs)
		return nil, err
	}
	return bufs, nil
}

func (r *rawCUDA) release(b *rawBufs) {
	for _, p := range []uintptr{b.a, b.b, b.c} {
		if p != 0 {
			r.free(p)
		}
	}
	if b.host != nil {
		r.freeHost(b.host)
	}
}

// upload copies the pinned A and B to the device, synchronously.
func (r *rawCUDA) upload(b *rawBufs) error {
	bytes := uintptr(b.n * b.n * 8)
	for i, d := range []uintptr{b.a, b.b} {
		if code := r.memcpyToDevice(d, unsafe.Add(b.host, uintptr(i)*bytes), bytes, 1); code != 0 {
			return fmt.Errorf("cudaMemcpy: %w", cublas.CUDAError(code))
		}
	}
	return nil
}

// gemm times reps back-to-back cublasDgemm calls on device buffers,
// synchronizing once at the end.
func (r *rawCUDA) gemm(b *rawBufs, reps int) (time.Duration, error) {
	n := int32(b.n)
	alpha, beta := 1.0, 0.0
	start := time.Now()
	for range reps {
		if st := r.dgemm(r.handle, 0, 0, n, n, n, &alpha, b.b, n, b.a, n, &beta, b.c, n); st != 0 {
			return 0, cublas.Status(st)
		}
	}
	if code := r.synchronize(); code != 0 {
		return 0, cublas.CUDAError(code)
	}
	return time.Since(start), nil
}

// transfer times reps rounds of the transfers a host-to-host DGEMM needs
// (A and B up, C down) between pinned memory and the device, with
// synchronous cudaMemcpy, one after the other.
func (r *rawCUDA) transfer(b *rawBufs, reps int) (time.Duration, error) {
	bytes := uintptr(b.n * b.n * 8)
	start := time.Now()
	for range reps {
		if err := r.upload(b); err != nil {
			return 0, err
		}
		if code := r.memcpyToHost(unsafe.Add(b.host, 2*bytes), b.c, bytes, 2); code != 0 {
			return 0, fmt.Errorf("cudaMemcpy: %w", cublas.CUDAError(code))
		}
	}
	return time.Since(start), nil
}
