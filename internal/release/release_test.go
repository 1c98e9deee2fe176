package release_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/orwl-go/orwl/internal/release"
)

func TestStoresAreLoaded(t *testing.T) {
	var b atomic.Bool
	var u32 atomic.Uint32
	var u64 atomic.Uint64
	for _, v := range []bool{true, false, true} {
		release.Bool(&b, v)
		if b.Load() != v {
			t.Fatalf("Bool(%v): Load returned %v", v, b.Load())
		}
	}
	for _, v := range []uint32{1, 1<<32 - 1, 0} {
		release.Uint32(&u32, v)
		if got := u32.Load(); got != v {
			t.Fatalf("Uint32(%d): Load returned %d", v, got)
		}
	}
	for _, v := range []uint64{1, 1<<64 - 1, 0} {
		release.Uint64(&u64, v)
		if got := u64.Load(); got != v {
			t.Fatalf("Uint64(%d): Load returned %d", v, got)
		}
	}
}

// TestMessagePassing hands slots of a small ring from a writer to a reader and back, each
// side publishing its position with a release store: a reader that sees a position sees
// what was written before it, and a writer that sees the reader's position never
// overwrites a slot that the reader has yet to read.
func TestMessagePassing(t *testing.T) {
	const slots, n = 8, 200000
	var ring [slots]uint64
	var written, read atomic.Uint64
	done := make(chan error, 1)
	go func() {
		for i := uint64(0); i < n; {
			if written.Load() == i {
				continue
			}
			if got := ring[i%slots]; got != i+1 {
				done <- fmt.Errorf("slot %d: read %d, want %d", i%slots, got, i+1)
				return
			}
			i++
			release.Uint64(&read, i)
		}
		done <- nil
	}()
	for i := uint64(0); i < n; {
		if i-read.Load() == slots {
			continue
		}
		ring[i%slots] = i + 1
		i++
		release.Uint64(&written, i)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
