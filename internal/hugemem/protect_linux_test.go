package hugemem

import (
	"runtime/debug"
	"testing"
	"unsafe"
)

// faultsOn reports whether use faults, as a panic on this goroutine.
func faultsOn(use func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	use()
	return false
}

var sink byte

// TestPagesProtectRetire: a buffer of Pages, small or large, is mapped; ReadOnly makes a
// write fault and Find name it, ReadWrite undoes that, and once retired every use faults,
// Find still names it, and Free and Protect ignore it.
func TestPagesProtectRetire(t *testing.T) {
	for _, n := range []int{1, 64, 4097, Threshold + 8} {
		b := Pages(n)
		if len(b) != n || !Mapped(b) || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
			t.Fatalf("Pages(%d): len %d, mapped %v, address %p", n, len(b), Mapped(b), &b[0])
		}
		b[n-1] = 1
		if err := Protect(b, ReadOnly); err != nil {
			t.Fatal(err)
		}
		if faultsOn(func() { sink = b[n-1] }) {
			t.Fatalf("Pages(%d): a read of a read-only buffer faulted", n)
		}
		if !faultsOn(func() { b[n-1] = 2 }) || b[n-1] != 1 {
			t.Fatalf("Pages(%d): a write to a read-only buffer did not fault (byte %d)", n, b[n-1])
		}
		if a, off, size, ok := Find(uintptr(unsafe.Pointer(&b[n-1]))); !ok || a != ReadOnly || off != n-1 || size != n {
			t.Fatalf("Pages(%d): Find of its last byte: %v %d %d %v", n, a, off, size, ok)
		}
		if err := Protect(b[:0], ReadWrite); err != nil {
			t.Fatal(err)
		}
		if faultsOn(func() { b[n-1] = 3 }) || b[n-1] != 3 {
			t.Fatalf("Pages(%d): a write after ReadWrite failed", n)
		}
		Retire(b)
		if Mapped(b) {
			t.Fatalf("Pages(%d): still mapped once retired", n)
		}
		if !faultsOn(func() { sink = b[0] }) || !faultsOn(func() { b[0] = 1 }) {
			t.Fatalf("Pages(%d): a use of a retired buffer did not fault", n)
		}
		if a, off, _, ok := Find(uintptr(unsafe.Pointer(&b[0]))); !ok || a != NoAccess || off != 0 {
			t.Fatalf("Pages(%d): Find of a retired buffer: %v %d %v", n, a, off, ok)
		}
		Free(b) // ignored
		if err := Protect(b, ReadWrite); err != nil || !faultsOn(func() { b[0] = 1 }) {
			t.Fatalf("Pages(%d): Protect revived a retired buffer (%v)", n, err)
		}
	}
	if b := Pages(0); b == nil || len(b) != 0 {
		t.Fatal("Pages(0) is not an empty slice")
	}
	if _, _, _, ok := Find(uintptr(unsafe.Pointer(&sink))); ok {
		t.Fatal("Find names Go memory")
	}
}
