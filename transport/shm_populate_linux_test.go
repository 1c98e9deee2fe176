package transport

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// A segment's pages are faulted in when it is made and when its offer is opened: the first
// megabytes through a ring (a tile of a factorisation) then pay no page fault per 4 KiB
// page, in either process.
func TestSegmentPagesAreFaultedIn(t *testing.T) {
	probe, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	refused := unix.Madvise(probe, unix.MADV_POPULATE_WRITE)
	unix.Munmap(probe)
	if refused != nil {
		t.Skipf("this kernel refuses MADV_POPULATE_WRITE: %v", refused)
	}
	seg, offer := testSegment(t)
	mapped := openSegment(offer)
	if mapped == nil {
		t.Fatal("a segment of this process could not be opened")
	}
	defer unmap(mapped)
	runtime.LockOSThread() // the faults counted are this thread's
	defer runtime.UnlockOSThread()
	before := threadFaults(t)
	for off := 0; off < len(seg); off += 4096 {
		seg[off]++
		mapped[off]++
	}
	if n := threadFaults(t) - before; n > 16 {
		t.Errorf("writing a byte of every page of a %d KiB segment through both of its mappings took %d page faults; want none", len(seg)>>10, n)
	}
}

// threadFaults returns the page faults of the calling thread so far.
func threadFaults(t *testing.T) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt + ru.Majflt
}
