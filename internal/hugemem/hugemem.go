// Package hugemem allocates the large buffers of a job (location data, mirrors of remote
// locations, matrices) outside the Go heap, mapped in pieces aligned to a huge page (2 MiB),
// so that Linux may back them with transparent huge pages; the garbage collector neither
// paces on these buffers nor scans them, and they are freed when their owner says so.
// Small buffers, and every buffer outside Linux, come from the Go heap.
//
// Whether mapped buffers get huge pages is the environment variable ORWL_HUGEPAGES's
// choice: "on" asks for them (MADV_HUGEPAGE), "off" refuses them (MADV_NOHUGEPAGE), and
// unset (or anything else) leaves it to the system's policy
// (/sys/kernel/mm/transparent_hugepage/enabled, "madvise" on most distributions: no huge
// pages). Huge pages cut the page faults of touching fresh memory 512-fold, and make it
// faster where memory is there to be had; but a huge page needs 2 MiB of physical memory
// at once, which a virtual machine whose host lends memory lazily may only find in memory
// the host has not backed yet, slower to touch than the small pages the guest recycles
// (measured: go run ./lab/bench first). Hence the default, for Alloc. AllocHuge asks for
// huge pages unless the variable is "off": for buffers touched once, outside anything
// timed, and filled later on a timed path (the snapshot buffers of checkpoints).
//
// A mapped buffer is not garbage collected: whoever allocates it must Free it once nothing
// uses it, and must not use it afterwards (a use after Free faults). This package only
// allocates and frees; it must not touch the memory it hands out (a buffer's pages are
// faulted in by its first user, inside whatever that user times), but when asked to: Move
// copies a buffer's bytes into another by moving its pages there, where it can, so that
// data lent to a buffer is neither copied nor faults fresh pages in.
//
// AllocShared maps a buffer that other processes of the host may read in place (View):
// shared.go.
//
// For checks of how a buffer is used, Pages maps a buffer of any size on pages of its own;
// Protect makes a mapped buffer read-only or writable again, Retire makes it inaccessible for
// good, and Find tells what a faulting address belongs to, so that a fault can be explained.
package hugemem

import (
	"os"
	"sync"
	"unsafe"
)

// Threshold is the size from which Alloc maps a buffer instead of taking it from the Go
// heap: one huge page.
const Threshold = hugePage

// hugePage is the size of a transparent huge page on the architectures Go supports.
const hugePage = 2 << 20

// mapped records the regions Alloc, AllocShared, Pages and View mapped, by the address of
// their first byte, so that Free knows what to unmap, and ignores what it did not map;
// retired records the regions Retire made inaccessible, which nothing maps again.
var (
	mu      sync.Mutex
	mapped  = map[unsafe.Pointer]region{}
	retired = map[unsafe.Pointer]region{}
)

// region is a mapping: its length, the size of the buffer it holds, what it allows, and
// whether it is a shared buffer or another process's (shared.go).
type region struct {
	length uintptr
	size   int
	access Access
	share  int64 // 1 + the buffer's offset in this process's file of shared memory; 0: not shared
	view   bool  // a view of another process's shared buffer (View)
}

// release frees the memory of r, whose addresses are unmapped or reserved: a shared
// buffer's range of the file.
func (r region) release() {
	if r.share != 0 {
		punch(r.share-1, r.length)
	}
}

// Access is what the pages of a mapped buffer allow.
type Access uint8

// The accesses of a mapped buffer: ReadWrite when allocated, ReadOnly or ReadWrite again
// (Protect), NoAccess once retired (Retire).
const (
	ReadWrite Access = iota
	ReadOnly
	NoAccess
)

// advice is ORWL_HUGEPAGES, read once: "on", "off", or anything else for the system's policy.
var advice = sync.OnceValue(func() string { return os.Getenv("ORWL_HUGEPAGES") })

// Alloc returns n zeroed bytes whose first byte is 8-byte aligned (page aligned when
// mapped); never nil, and empty for n <= 0. Buffers of at least Threshold bytes are mapped
// where the system allows it, with ORWL_HUGEPAGES's advice; give them back with Free.
// Smaller ones, and mapped ones that the system refuses, are Go memory, which Free ignores.
func Alloc(n int) []byte { return alloc(n, advice()) }

// AllocHuge is Alloc asking for huge pages whatever the system's policy, unless
// ORWL_HUGEPAGES is "off": for a buffer that its owner touches once when it allocates it,
// outside anything timed, and that is then filled, now and then, on a path that is timed,
// where a small page's translation, long unused, is expensive to find again (a virtual
// machine walks two levels of page tables): 512 times fewer of them.
func AllocHuge(n int) []byte {
	a := advice()
	if a != "off" {
		a = "on"
	}
	return alloc(n, a)
}

// alloc is Alloc with the advice a for a mapped buffer.
func alloc(n int, a string) []byte {
	if n <= 0 {
		return []byte{}
	}
	if n >= Threshold {
		if p, length := mapHuge(uintptr(n), a); p != nil {
			return record(p, length, n)
		}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// record registers the mapping of length bytes at p, which holds a buffer of n bytes, and
// returns the buffer.
func record(p unsafe.Pointer, length uintptr, n int) []byte {
	mu.Lock()
	mapped[p] = region{length: length, size: n}
	mu.Unlock()
	return unsafe.Slice((*byte)(p), n)
}

// Pages is Alloc for a buffer that Protect and Retire must be able to guard: it maps
// buffers under Threshold too, on whole pages of their own (buffers of Threshold bytes and
// more are mapped as Alloc maps them). Where the system maps nothing (outside Linux), or
// refuses, the buffer is Go memory, which Protect and Retire ignore.
func Pages(n int) []byte {
	if n <= 0 || n >= Threshold {
		return Alloc(n)
	}
	if p, length := mapPages(uintptr(n)); p != nil {
		return record(p, length, n)
	}
	return Alloc(n)
}

// Protect sets what the pages of b allow, when b starts a buffer that Alloc or Pages mapped
// (its length does not matter): ReadOnly makes every write to it fault, ReadWrite undoes
// that. It does nothing for any other slice, nor for a view (View), which stays
// read-only. It fails only when the system refuses (too many mappings), leaving the access
// unchanged.
func Protect(b []byte, a Access) error {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if p == nil || a == NoAccess {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	r, ok := mapped[p]
	if !ok || r.access == a || r.view {
		return nil
	}
	if err := protect(p, r.length, a); err != nil {
		return err
	}
	r.access = a
	mapped[p] = r
	return nil
}

// Retire frees the memory of b, a buffer that Alloc or Pages mapped (as Free takes it),
// but keeps its addresses reserved and inaccessible for good: every later use of b, or of
// any slice of it, faults, whatever its size, and Find names it. It does nothing for any
// other slice.
func Retire(b []byte) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if p == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	r, ok := mapped[p]
	if !ok {
		return
	}
	delete(mapped, p)
	r.access = NoAccess
	if reserve(p, r.length) != nil {
		unmap(p, r.length) // the system refuses to keep the addresses: free them at least
	} else {
		retired[p] = r
	}
	r.release()
}

// Find reports which buffer that Alloc or Pages mapped, retired or not, holds the address
// addr: the access its pages allow, the offset of addr in it and its size. ok is false when
// addr is in none.
func Find(addr uintptr) (a Access, offset, size int, ok bool) {
	mu.Lock()
	defer mu.Unlock()
	for _, regions := range []map[unsafe.Pointer]region{mapped, retired} {
		for p, r := range regions {
			if start := uintptr(p); addr >= start && addr < start+r.length {
				return r.access, int(addr - start), r.size, true
			}
		}
	}
	return 0, 0, 0, false
}

// AllocFilled is Alloc for a buffer that its caller is about to write whole (a message's
// payload lands in it): the kernel gives a mapped buffer its pages during the call, in
// system calls of 64 MiB each (MADV_POPULATE_WRITE, Linux 5.14 and later; elsewhere they
// come with the caller's writes, as with Alloc), instead of one page fault per 4 KiB page in
// the writes that follow. Between two of them the process's other threads may map memory,
// so a buffer of gigabytes does not hold them up for seconds. The call is then the
// buffer's first use: make it when the buffer is needed, not ahead, so that its cost is
// the caller's.
func AllocFilled(n int) []byte {
	b := Alloc(n)
	Populate(b)
	return b
}

// Populate faults in the pages of b, a buffer that Alloc or AllocShared mapped, as
// AllocFilled does; it does nothing for any other slice.
func Populate(b []byte) {
	if Mapped(b) {
		fill(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	}
}

// Move copies src into dst, as copy does (the shorter length, n), but moves src's memory
// instead where it can: when src and dst start on a page, lie in writable buffers that
// Alloc or Pages mapped and do not overlap, the whole pages of src are moved into dst
// (Linux: mremap), so that nothing is copied and dst takes no page fault; only a partial
// last page is copied. moved reports that: the whole pages of src then read zero (their
// memory is dst's, and a write to them faults in fresh pages). Otherwise src is copied and
// unchanged. Two shared buffers of one size (AllocShared), dst and src whole, swap their
// memory instead: src then holds what dst held, and both stay shared. It is for data that
// its owner lends to a buffer (and may take back with another Move) rather than copy.
func Move(dst, src []byte) (n int, moved bool) {
	n = min(len(dst), len(src))
	if n == 0 {
		return 0, false
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	pages := uintptr(0)
	mu.Lock()
	if swapShared(d, s, len(dst), len(src)) {
		mu.Unlock()
		return n, true
	}
	if apart := uintptr(d)+uintptr(n) <= uintptr(s) || uintptr(s)+uintptr(n) <= uintptr(d); apart && writable(d, n) && writable(s, n) {
		pages = movePages(d, s, uintptr(n))
	}
	mu.Unlock()
	copy(dst[pages:n], src[pages:n])
	return n, pages > 0
}

// writable reports whether the n bytes at p lie in one buffer that Alloc or Pages mapped
// and that allows writes; mu held.
func writable(p unsafe.Pointer, n int) bool {
	for start, r := range mapped {
		if a, s := uintptr(p), uintptr(start); a >= s && a+uintptr(n) <= s+r.length {
			return r.access == ReadWrite && r.share == 0 && !r.view // moved pages would not be shared
		}
	}
	return false
}

// Free unmaps b when Alloc, AllocShared, Pages or View mapped it (a shared buffer's memory
// is freed, whoever views it; a view's is its owner's): b must then be the slice returned,
// or a slice of it that starts at the same byte (its length and capacity do not matter).
// It does nothing for any other slice, nor for one already freed. b and every slice of
// the buffer must not be used after Free.
func Free(b []byte) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if p == nil {
		return
	}
	mu.Lock()
	r, ok := mapped[p]
	delete(mapped, p)
	mu.Unlock()
	if ok {
		unmap(p, r.length)
		r.release()
	}
}

// Mapped reports whether b starts a buffer that Alloc or Pages mapped and that neither Free
// nor Retire has released.
func Mapped(b []byte) bool {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if p == nil {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	_, ok := mapped[p]
	return ok
}

// Float64s returns n zeroed float64 values, allocated as Alloc allocates 8n bytes; give
// them back with FreeFloat64s.
func Float64s(n int) []float64 {
	if n <= 0 {
		return []float64{}
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(Alloc(8*n)))), n)
}

// MoveFloat64s is Move for float64 values: n counts values.
func MoveFloat64s(dst, src []float64) (n int, moved bool) {
	n, moved = Move(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 8*len(dst)),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 8*len(src)))
	return n / 8, moved
}

// FreeFloat64s frees f, as Free frees the bytes of a buffer Float64s returned.
func FreeFloat64s(f []float64) {
	Free(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 0))
}
