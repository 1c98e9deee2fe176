package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// fillStep is the most that fill faults in with one system call (see fill).
const fillStep = 64 << 20

// mapHuge maps n bytes, rounded up to whole huge pages, at an address aligned to a huge
// page, and gives the kernel the advice ("on": MADV_HUGEPAGE, under the usual THP setting
// "madvise" the only regions that get huge pages; "off": MADV_NOHUGEPAGE; else none). It
// returns the address and the mapped length, or nil when the system refuses the mapping.
func mapHuge(n uintptr, advice string) (unsafe.Pointer, uintptr) {
	length := (n + hugePage - 1) &^ (hugePage - 1)
	aligned := reserveAligned(length)
	if aligned == nil {
		return nil, 0
	}
	adviseHuge(aligned, length, advice)
	return aligned, length
}

// reserveAligned maps length bytes of private memory, a multiple of the huge page, at an
// address aligned to a huge page; nil when the system refuses.
func reserveAligned(length uintptr) unsafe.Pointer {
	// Map one huge page more, then cut the unaligned head and the tail off.
	p, err := unix.MmapPtr(-1, 0, nil, length+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	head := (hugePage - uintptr(p)%hugePage) % hugePage
	if head > 0 {
		unix.MunmapPtr(p, head)
	}
	aligned := unsafe.Add(p, head)
	if tail := hugePage - head; tail > 0 {
		unix.MunmapPtr(unsafe.Add(aligned, length), tail)
	}
	return aligned
}

// adviseHuge gives the kernel the advice for the length bytes at p. A kernel without
// transparent huge pages refuses it: the buffer then simply has small pages.
func adviseHuge(p unsafe.Pointer, length uintptr, advice string) {
	switch advice {
	case "on":
		unix.Madvise(unsafe.Slice((*byte)(p), length), unix.MADV_HUGEPAGE)
	case "off":
		unix.Madvise(unsafe.Slice((*byte)(p), length), unix.MADV_NOHUGEPAGE)
	}
}

// unmap gives a region mapHuge mapped back to the system.
func unmap(p unsafe.Pointer, length uintptr) { unix.MunmapPtr(p, length) }

// fill asks the kernel to fault in the pages of the first n bytes at p, a region mapHuge
// mapped, for writing, fillStep bytes per system call: the kernel holds the process's
// memory map during each call, so that any thread that maps or unmaps meanwhile (the Go
// runtime growing its heap, with its scheduler held) waits for one step, tens of
// milliseconds, never for gigabytes (seconds, long enough for the process's heartbeats to
// stop). A kernel that does not know the advice (before 5.14) refuses it: the pages then
// come with the first writes.
func fill(p unsafe.Pointer, n uintptr) {
	const page = 4 << 10
	n = (n + page - 1) &^ (page - 1)
	for off := uintptr(0); off < n; off += fillStep {
		step := unsafe.Slice((*byte)(unsafe.Add(p, off)), min(fillStep, n-off))
		if unix.Madvise(step, unix.MADV_POPULATE_WRITE) != nil {
			return
		}
	}
}

// movePages moves the whole pages of the n bytes at src onto dst, both in regions that
// mapHuge or mapPages mapped, writable and apart, and returns how many bytes it moved: a
// multiple of the page size, 0 when either is not on a page or the kernel refuses
// (MREMAP_DONTUNMAP: Linux 5.7 and later). src keeps its mapping, its pages read zero.
func movePages(dst, src unsafe.Pointer, n uintptr) uintptr {
	page := uintptr(unix.Getpagesize())
	n &^= page - 1
	if n == 0 || uintptr(dst)%page != 0 || uintptr(src)%page != 0 {
		return 0
	}
	if _, err := unix.MremapPtr(src, n, dst, n, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED|unix.MREMAP_DONTUNMAP); err != nil {
		return 0
	}
	return n
}

// mapPages maps n bytes, rounded up to whole pages. It returns the address and the mapped
// length, or nil when the system refuses the mapping.
func mapPages(n uintptr) (unsafe.Pointer, uintptr) {
	page := uintptr(unix.Getpagesize())
	length := (n + page - 1) &^ (page - 1)
	p, err := unix.MmapPtr(-1, 0, nil, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, 0
	}
	return p, length
}

// protect sets the access of a region that mapHuge or mapPages mapped.
func protect(p unsafe.Pointer, length uintptr, a Access) error {
	prot := unix.PROT_READ | unix.PROT_WRITE
	if a == ReadOnly {
		prot = unix.PROT_READ
	}
	return unix.Mprotect(unsafe.Slice((*byte)(p), length), prot)
}

// reserve replaces a region that mapHuge or mapPages mapped by inaccessible pages that hold
// no memory.
func reserve(p unsafe.Pointer, length uintptr) error {
	_, err := unix.MmapPtr(-1, 0, p, length, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}
