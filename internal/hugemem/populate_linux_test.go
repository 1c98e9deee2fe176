package hugemem

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestFillLetsMappingsThrough: while fill faults in a large buffer, the process's other
// threads still map and unmap memory (as the Go runtime does when its heap grows, with its
// scheduler held): each mapping waits for one bounded step of the fill at most, not for
// the whole of it (a single MADV_POPULATE_WRITE of 2 GiB held the process's mappings for
// over 3 s, and with them its heartbeats).
func TestFillLetsMappingsThrough(t *testing.T) {
	supportsPopulate(t)
	const size = 16 * fillStep
	p, length := mapHuge(size, "")
	if p == nil {
		t.Skip("the system refuses a mapping of 1 GiB")
	}
	defer unmap(p, length)
	var done atomic.Bool
	longest := make(chan time.Duration)
	go func() {
		var worst time.Duration
		for !done.Load() {
			start := time.Now()
			b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err == nil {
				unix.Munmap(b)
			}
			worst = max(worst, time.Since(start))
		}
		longest <- worst
	}()
	start := time.Now()
	fill(p, size)
	took := time.Since(start)
	done.Store(true)
	worst := <-longest
	t.Logf("filling %d MiB took %v; the longest mapping meanwhile %v", size>>20, took, worst)
	if worst > took/2 {
		t.Fatalf("a mapping waited %v while filling %d MiB took %v: fill holds the process's mappings for more than a step of %d MiB",
			worst, size>>20, took, fillStep>>20)
	}
	if b := unsafe.Slice((*byte)(p), size); b[size-1] != 0 {
		t.Fatalf("the last byte is %d, want 0", b[size-1])
	}
}
