package hugemem

import (
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"
)

// TestSharedBufferAndItsView: a shared buffer is mapped and named; a view of it shows
// what its owner writes, faults on a write (Find: read-only), stays read-only whatever
// Protect asks, and leaves the buffer alone when freed; freeing the buffer frees its
// memory (a view still mapped reads zero), and the next buffer takes another range.
func TestSharedBufferAndItsView(t *testing.T) {
	const n = Threshold + 100
	b := AllocShared(n)
	s, ok := SharedAt(b)
	if len(b) != n || !Mapped(b) || !ok || s.PID != int32(os.Getpid()) || s.Len != n || s.Off%hugePage != 0 {
		t.Fatalf("AllocShared(%d): len %d, mapped %v, share %+v %v", n, len(b), Mapped(b), s, ok)
	}
	if _, ok := SharedAt(Alloc(n)); ok {
		t.Fatal("SharedAt of Alloc's buffer reports it shared")
	}
	back, err := ParseShare(s.Append(nil))
	if err != nil || back != s {
		t.Fatalf("ParseShare(Append(%+v)) = %+v, %v", s, back, err)
	}
	for i := 0; i < n; i += 4096 {
		b[i] = byte(i>>12) | 1
	}
	v, err := View(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != n || &v[0] == &b[0] {
		t.Fatalf("View: %d bytes at %p, the buffer at %p", len(v), &v[0], &b[0])
	}
	for i := 0; i < n; i += 4096 {
		if v[i] != byte(i>>12)|1 {
			t.Fatalf("view byte %d = %d, want %d", i, v[i], byte(i>>12)|1)
		}
	}
	b[n-1] = 7
	if v[n-1] != 7 {
		t.Fatalf("the owner's write does not show in the view: %d", v[n-1])
	}
	Protect(v, ReadWrite)
	if !faultsOn(func() { v[5] = 9 }) || b[5] != 0 {
		t.Fatalf("a write through the view did not fault (byte %d)", b[5])
	}
	if a, off, _, ok := Find(uintptr(unsafe.Pointer(&v[5]))); !ok || a != ReadOnly || off != 5 {
		t.Fatalf("Find in the view: %v %d %v", a, off, ok)
	}
	Free(v)
	if b[n-1] != 7 {
		t.Fatal("freeing the view changed the buffer")
	}
	v2, err := View(s)
	if err != nil {
		t.Fatal(err)
	}
	Free(b)
	if v2[0] != 0 || v2[n-1] != 0 {
		t.Fatalf("a freed shared buffer still reads %d %d through a view", v2[0], v2[n-1])
	}
	Free(v2)
	b2 := AllocShared(n)
	if s2, _ := SharedAt(b2); s2.Off == s.Off {
		t.Fatalf("a new shared buffer took the range of a freed one (offset %d)", s.Off)
	}
	src := Alloc(n)
	src[0] = 3
	if _, moved := Move(b2, src); moved || b2[0] != 3 || src[0] != 3 {
		t.Fatalf("Move into a shared buffer: moved %v, dst %d, src %d (want a copy)", moved, b2[0], src[0])
	}
	Free(src)
	Free(b2)
}

// viewChildEnv makes the test binary a child of TestViewFromAnotherProcess, which views
// the buffer its value names (hex) and prints its first and last bytes.
const viewChildEnv = "HUGEMEM_TEST_VIEW"

// TestViewFromAnotherProcess: another process of this host views a shared buffer and
// reads what its owner wrote; a retired buffer reads zero there.
func TestViewFromAnotherProcess(t *testing.T) {
	if name := os.Getenv(viewChildEnv); name != "" {
		raw, err := hex.DecodeString(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseShare(raw)
		if err != nil {
			t.Fatal(err)
		}
		v, err := View(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("bytes=%d,%d", v[0], v[len(v)-1])
		return
	}
	const n = 3 * Threshold
	b := AllocShared(n)
	b[0], b[n-1] = 11, 12
	s, _ := SharedAt(b)
	child := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestViewFromAnotherProcess$", "-test.v")
		cmd.Env = append(os.Environ(), viewChildEnv+"="+hex.EncodeToString(s.Append(nil)))
		out, err := cmd.CombinedOutput()
		_, after, ok := strings.Cut(string(out), "bytes=")
		if err != nil || !ok {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return strings.Fields(after)[0]
	}
	if got := child(); got != "11,12" {
		t.Fatalf("the other process read %s, want 11,12", got)
	}
	Retire(b)
	if got := child(); got != "0,0" {
		t.Fatalf("the other process read %s of a retired buffer, want 0,0", got)
	}
}

// TestMoveSwapsSharedBuffers: Move between two whole shared buffers of one size swaps
// their memory (no copy): each holds the other's data, is still shared, and a view of the
// destination shows what the source held; buffers of two sizes are copied.
func TestMoveSwapsSharedBuffers(t *testing.T) {
	const n = 2*Threshold + 8
	a, b := AllocShared(n), AllocShared(n)
	a[0], a[n-1], b[0], b[n-1] = 1, 2, 3, 4
	sa, _ := SharedAt(a)
	sb, _ := SharedAt(b)
	if got, moved := Move(a, b); got != n || !moved {
		t.Fatalf("Move: %d bytes, moved %v", got, moved)
	}
	if a[0] != 3 || a[n-1] != 4 || b[0] != 1 || b[n-1] != 2 {
		t.Fatalf("after Move: dst %d %d, src %d %d; want 3 4, 1 2", a[0], a[n-1], b[0], b[n-1])
	}
	na, okA := SharedAt(a)
	nb, okB := SharedAt(b)
	if !okA || !okB || na.Off != sb.Off || nb.Off != sa.Off {
		t.Fatalf("after Move: shares %+v %v, %+v %v; were %+v, %+v", na, okA, nb, okB, sa, sb)
	}
	v, err := View(na)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 3 {
		t.Fatalf("a view of the destination reads %d, want 3", v[0])
	}
	Free(v)
	c := AllocShared(n + 4096)
	c[0] = 9
	if _, moved := Move(a, c); moved || a[0] != 9 || c[0] != 9 {
		t.Fatalf("Move between shared buffers of two sizes: moved %v, dst %d, src %d (want a copy)", moved, a[0], c[0])
	}
	Free(a)
	Free(b)
	Free(c)
}

// TestViewOfAnEndedProcess: a buffer whose process has ended cannot be viewed, and the
// error says so (ErrGone), unlike one of a live process that names no buffer.
func TestViewOfAnEndedProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := View(Share{PID: int32(cmd.Process.Pid), FD: 3, Len: Threshold}); !errors.Is(err, ErrGone) {
		t.Fatalf("a view of an ended process's buffer: %v, want ErrGone", err)
	}
	if _, err := View(Share{PID: int32(os.Getpid()), FD: 1 << 20, Len: Threshold}); err == nil || errors.Is(err, ErrGone) {
		t.Fatalf("a view of no buffer of a live process: %v, want another error", err)
	}
}

// TestSmallSharedBufferAndWritableView: AllocSharedAny shares a buffer of a few bytes too,
// and a writable view of it shows each side's writes to the other, where View's faults.
func TestSmallSharedBufferAndWritableView(t *testing.T) {
	b := AllocSharedAny(24)
	s, ok := SharedAt(b)
	if len(b) != 24 || !ok || s.Len != 24 {
		t.Fatalf("AllocSharedAny(24): len %d, share %+v %v", len(b), s, ok)
	}
	defer Free(b)
	w, err := ViewWritable(s)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(w)
	b[3], w[20] = 5, 6
	if w[3] != 5 || b[20] != 6 {
		t.Fatalf("writes do not cross: view byte 3 = %d, buffer byte 20 = %d", w[3], b[20])
	}
	if a, _, _, ok := Find(uintptr(unsafe.Pointer(&w[0]))); !ok || a != ReadWrite {
		t.Fatalf("Find in the writable view: %v %v", a, ok)
	}
	r, err := View(s)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(r)
	if r[20] != 6 || !faultsOn(func() { r[0] = 1 }) {
		t.Fatalf("the read-only view: byte 20 = %d, or a write did not fault", r[20])
	}
}
