package hugemem

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestAllocFilled: a buffer from AllocFilled is zeroed and mapped like Alloc's, and its
// pages are there when the call returns: writing it whole takes almost no page faults
// (a kernel before 5.14 refuses the advice, and then the test skips).
func TestAllocFilled(t *testing.T) {
	const size = 32 << 20
	b := AllocFilled(size)
	defer Free(b)
	if len(b) != size || !Mapped(b) {
		t.Fatalf("AllocFilled(%d): len %d, mapped %v", size, len(b), Mapped(b))
	}
	for i := 0; i < size; i += 4096 {
		if b[i] != 0 {
			t.Fatalf("byte %d is %d, want 0", i, b[i])
		}
	}
	n := faultsOf(t, func() {
		for i := 0; i < size; i += 4096 {
			b[i] = 1
		}
	})
	if n > size/4096/2 && supportsPopulate(t) {
		t.Fatalf("writing %d MiB from AllocFilled took %d page faults, want few (the pages were faulted in by AllocFilled)", size>>20, n)
	}
	t.Logf("%d page faults writing %d MiB", n, size>>20)
}

// supportsPopulate reports whether the kernel takes MADV_POPULATE_WRITE; it skips the test
// when not.
func supportsPopulate(t *testing.T) bool {
	p, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(p)
	if err := unix.Madvise(p, unix.MADV_POPULATE_WRITE); err != nil {
		t.Skipf("this kernel refuses MADV_POPULATE_WRITE: %v", err)
	}
	return true
}
