package cublas

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"
)

// pinned records the page-locked host ranges known to this package (from
// AllocHost and RegisterHost) so that transfers from them skip staging.
var pinned struct {
	sync.Mutex
	regions []region // sorted by start, non-overlapping
}

// region is a page-locked host address range [start, end) and whether it
// came from cudaMallocHost (true) or cudaHostRegister (false).
type region struct {
	start, end uintptr
	alloc      bool
}

// span returns the address range of s.
func span(s []float64) (start, end uintptr) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p, p + uintptr(len(s))*8
}

// isPinned reports whether s lies entirely in one page-locked region.
func isPinned(s []float64) bool {
	if len(s) == 0 {
		return false
	}
	start, end := span(s)
	pinned.Lock()
	defer pinned.Unlock()
	i := sort.Search(len(pinned.regions), func(i int) bool { return pinned.regions[i].end > start })
	return i < len(pinned.regions) && pinned.regions[i].start <= start && end <= pinned.regions[i].end
}

func addRegion(r region) {
	pinned.Lock()
	defer pinned.Unlock()
	i := sort.Search(len(pinned.regions), func(i int) bool { return pinned.regions[i].start >= r.start })
	pinned.regions = append(pinned.regions, region{})
	copy(pinned.regions[i+1:], pinned.regions[i:])
	pinned.regions[i] = r
}

// removeRegion removes the region starting at start with the given kind and
// reports whether it was there.
func removeRegion(start uintptr, alloc bool) bool {
	pinned.Lock()
	defer pinned.Unlock()
	for i, r := range pinned.regions {
		if r.start == start && r.alloc == alloc {
			pinned.regions = append(pinned.regions[:i], pinned.regions[i+1:]...)
			return true
		}
	}
	return false
}

// AllocHost returns n float64s of page-locked (pinned) host memory from
// cudaMallocHost, zeroed. Transfers between pinned memory and the device run
// at full bus speed and asynchronously, so Dgemm and Matrix transfers on
// slices inside it (sub-slices included) skip the staging copy. The memory
// is outside the Go heap: it must be released with FreeHost, and the slice
// must not be used afterwards.
func AllocHost(n int) ([]float64, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cublas: AllocHost(%d): size must be positive", n)
	}
	if err := Load(); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := lib.check(lib.mallocHost(&p, uintptr(n)*8)); err != nil {
		return nil, fmt.Errorf("cudaMallocHost(%d bytes): %w", n*8, err)
	}
	s := unsafe.Slice((*float64)(p), n)
	clear(s)
	start, end := span(s)
	addRegion(region{start, end, true})
	return s, nil
}

// FreeHost releases memory returned by AllocHost; s must be the slice
// AllocHost returned (same first element).
func FreeHost(s []float64) error {
	if len(s) == 0 {
		return fmt.Errorf("cublas: FreeHost: empty slice")
	}
	if err := Load(); err != nil {
		return err
	}
	start, _ := span(s)
	if !removeRegion(start, true) {
		return fmt.Errorf("cublas: FreeHost: slice not from AllocHost")
	}
	return lib.check(lib.freeHost(unsafe.Pointer(unsafe.SliceData(s))))
}

// RegisterHost page-locks the memory of an existing slice with
// cudaHostRegister so that transfers from and to it are as fast as from
// AllocHost memory. Pinning costs time (the kernel maps every page), so it
// pays off for buffers reused across many calls. The caller must keep s
// alive and call UnregisterHost(s) before dropping it; Go never moves heap
// memory, so the pinned pages stay valid until then.
func RegisterHost(s []float64) error {
	if len(s) == 0 {
		return fmt.Errorf("cublas: RegisterHost: empty slice")
	}
	if err := Load(); err != nil {
		return err
	}
	if err := lib.check(lib.hostRegister(unsafe.Pointer(unsafe.SliceData(s)), uintptr(len(s))*8, hostRegisterPortable)); err != nil {
		return fmt.Errorf("cudaHostRegister(%d bytes): %w", len(s)*8, err)
	}
	start, end := span(s)
	addRegion(region{start, end, false})
	return nil
}

// UnregisterHost undoes RegisterHost(s).
func UnregisterHost(s []float64) error {
	if len(s) == 0 {
		return fmt.Errorf("cublas: UnregisterHost: empty slice")
	}
	if err := Load(); err != nil {
		return err
	}
	start, _ := span(s)
	if !removeRegion(start, false) {
		return fmt.Errorf("cublas: UnregisterHost: slice not registered: %w", ErrHostNotPinned)
	}
	return lib.check(lib.hostUnregister(unsafe.Pointer(unsafe.SliceData(s))))
}

// Alloc implements kernels.Allocator with AllocHost: operands allocated
// with it are transferred by DMA without staging.
func (g *Kernel) Alloc(n int) ([]float64, error) { return AllocHost(n) }

// Free implements kernels.Allocator with FreeHost.
func (g *Kernel) Free(s []float64) error { return FreeHost(s) }

// PinHost implements kernels.HostPinner with RegisterHost: the pinning is process-wide,
// as RegisterHost's.
func (g *Kernel) PinHost(s []float64) error { return RegisterHost(s) }

// UnpinHost implements kernels.HostPinner with UnregisterHost; it works on any Kernel,
// also after Close.
func (g *Kernel) UnpinHost(s []float64) error { return UnregisterHost(s) }
