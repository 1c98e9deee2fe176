package hugemem

import (
	"runtime"
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
	if uintptr(unsafe.Pointer(&b[0]))%(2<<20) != 0 {
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
