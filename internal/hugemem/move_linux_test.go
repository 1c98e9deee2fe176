package hugemem

import (
	"bytes"
	"testing"
)

// TestMove: Move hands the whole pages of a mapped source to a mapped destination without
// copying them: the destination holds the source's bytes (a partial last page copied) and
// reading it takes no page fault, the moved pages of the source read zero, a Move back
// restores the source, and both buffers are still there to write and free. Slices that are not on a page, or not
// mapped, are copied and the source kept.
func TestMove(t *testing.T) {
	const size = 8 << 20
	src, dst := Alloc(size+4096), Alloc(size)
	defer Free(src)
	defer Free(dst)
	n := size - 100 // not a whole number of pages: the last one is copied
	for i := range n + 4096 {
		src[i] = byte(i%251 + 1)
	}
	want := bytes.Clone(src[:n])
	var got, sum int
	var moved bool
	f := faultsOf(t, func() {
		got, moved = Move(dst, src[:n])
		for i := 0; i < n; i += 4096 {
			sum += int(dst[i])
		}
	})
	if got != n || !moved {
		t.Fatalf("Move returned %d, %v; want %d, true", got, moved, n)
	}
	if f > size/4096/8 {
		t.Fatalf("Move of %d MiB and reading it took %d page faults, want few: its pages were moved", size>>20, f)
	}
	if !bytes.Equal(dst[:n], want) {
		t.Fatal("the destination does not hold the source's bytes")
	}
	if src[0] != 0 || src[n-4096] != 0 {
		t.Fatalf("the moved pages of the source read %d and %d, want 0", src[0], src[n-4096])
	}
	if src[n] != byte(n%251+1) {
		t.Fatalf("the byte after the source changed: %d", src[n])
	}
	if _, moved := Move(src[:n], dst[:n]); !moved || !bytes.Equal(src[:n], want) || dst[0] != 0 {
		t.Fatalf("moving the pages back: moved %v, source restored %v, first byte of the destination %d", moved, bytes.Equal(src[:n], want), dst[0])
	}
	src[0], dst[0] = 7, 8 // both still writable
	if src[0] != 7 || dst[0] != 8 || sum == 0 {
		t.Fatal("writes after Move were lost")
	}

	odd := Alloc(size)
	defer Free(odd)
	for _, c := range []struct {
		name     string
		dst, src []byte
	}{
		{"source off a page", dst[:4096], odd[8 : 8+4096]},
		{"destination off a page", dst[8 : 8+4096], odd[:4096]},
		{"Go memory", make([]byte, 4096), odd[:4096]},
	} {
		for i := range c.src {
			c.src[i] = byte(i%13 + 1)
		}
		want := bytes.Clone(c.src)
		if got, moved := Move(c.dst, c.src); got != len(want) || moved || !bytes.Equal(c.dst, want) || !bytes.Equal(c.src, want) {
			t.Fatalf("%s: Move returned %d, %v; destination equal %v, source kept %v", c.name, got, moved, bytes.Equal(c.dst, want), bytes.Equal(c.src, want))
		}
	}
	if got, moved := Move(dst[:0], src); got != 0 || moved {
		t.Fatalf("Move into an empty slice returned %d, %v", got, moved)
	}
}
