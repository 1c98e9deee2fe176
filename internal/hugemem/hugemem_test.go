package hugemem

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestSmallBuffersAreGoMemory(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 7, 8, 4097, Threshold - 1} {
		b := Alloc(n)
		if b == nil || len(b) != max(n, 0) {
			t.Fatalf("Alloc(%d): len %d (nil %v)", n, len(b), b == nil)
		}
		if n > 0 && uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
			t.Fatalf("Alloc(%d) is not 8-byte aligned", n)
		}
		if Mapped(b) {
			t.Fatalf("Alloc(%d) mapped a buffer under the threshold", n)
		}
		Free(b) // ignored
	}
}

func TestLargeBuffers(t *testing.T) {
	n := Threshold + 12345
	b := Alloc(n)
	if len(b) != n || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		t.Fatalf("Alloc(%d): len %d, address %p", n, len(b), &b[0])
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d is %d, want 0", i, v)
		}
	}
	for i := range b {
		b[i] = byte(i)
	}
	if runtime.GOOS != "linux" {
		if Mapped(b) {
			t.Fatal("mapped outside Linux")
		}
		return
	}
	if !Mapped(b) {
		t.Fatal("a buffer over the threshold was not mapped")
	}
	if uintptr(unsafe.Pointer(&b[0]))%hugePage != 0 {
		t.Fatalf("mapped buffer at %p is not aligned to a huge page", &b[0])
	}
	Free(b[:0]) // the same first byte: frees
	if Mapped(b) {
		t.Fatal("still mapped after Free")
	}
	Free(b) // freed already: nothing happens
}

func TestFloat64s(t *testing.T) {
	f := Float64s(Threshold)
	if len(f) != Threshold || f[len(f)-1] != 0 {
		t.Fatalf("Float64s: len %d", len(f))
	}
	f[len(f)-1] = 1.5
	mapped := Mapped(unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 0))
	if mapped != (runtime.GOOS == "linux") {
		t.Fatalf("mapped %v on %s", mapped, runtime.GOOS)
	}
	FreeFloat64s(f[:0])
	if Mapped(unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 0)) {
		t.Fatal("still mapped after FreeFloat64s")
	}
	if len(Float64s(0)) != 0 {
		t.Fatal("Float64s(0) is not empty")
	}
}

// TestHugePagesCutPageFaults writes a mapped buffer of 64 MiB: with transparent huge pages
// that takes about one page fault per 2 MiB, where small pages take one per 4 KiB (16384).
func TestHugePagesCutPageFaults(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are not available here")
	}
	const size = 64 << 20
	b := Alloc(size)
	defer Free(b)
	before := faults(t)
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	got := faults(t) - before
	if small := int64(size / 4096); got > small/4 {
		t.Fatalf("%d page faults writing %d MiB: huge pages would take about %d, small pages %d", got, size>>20, size/hugePage, small)
	}
	t.Logf("%d page faults for %d MiB", got, size>>20)
}

func faults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt + ru.Majflt
}

// TestOff: with ORWL_HUGEPAGES=off every buffer is Go memory (checked in a child process,
// since the variable is read once).
func TestOff(t *testing.T) {
	if os.Getenv("HUGEMEM_TEST_CHILD") != "" {
		if b := Alloc(4 * Threshold); Mapped(b) || len(b) != 4*Threshold {
			t.Fatal("ORWL_HUGEPAGES=off: a large buffer was mapped")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOff$", "-test.v")
	cmd.Env = append(os.Environ(), "HUGEMEM_TEST_CHILD=1", "ORWL_HUGEPAGES=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOff") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
