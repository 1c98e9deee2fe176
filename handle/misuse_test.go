package handle_test

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
)

// TestSectionReportsGuardedFaults: a fault of a section's function on guarded data (a
// read-only buffer, a retired one) is the section's error, saying which misuse it was; the
// data is unchanged and the handle released. Any other panic goes on, with its value.
func TestSectionReportsGuardedFaults(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	ctx := context.Background()
	q := &queue{data: hugemem.Pages(64)}
	defer hugemem.Free(q.data)
	r := newHandle(q, fifo.Read, true)
	if err := r.Request(); err != nil {
		t.Fatal(err)
	}
	hugemem.Protect(q.data, hugemem.ReadOnly)
	err := r.Section(ctx, func(b []byte) error { b[9] = 42; return nil })
	hugemem.Protect(q.data, hugemem.ReadWrite)
	want := "task 1: section of read handle on x (position 0): write through a read handle's data (byte 9 of 64)"
	if !errors.Is(err, handle.ErrReadOnlyData) || !strings.HasPrefix(err.Error(), want) || q.data[9] != 0 {
		t.Fatalf("write through read-only data: %v (byte %d)\nwant %s...", err, q.data[9], want)
	}

	stale := hugemem.Pages(64)
	hugemem.Retire(stale)
	err = r.Section(ctx, func([]byte) error { stale[3] = 1; return nil })
	if !errors.Is(err, handle.ErrStaleData) || !strings.Contains(err.Error(), "(byte 3 of 64)") {
		t.Fatalf("use of a retired buffer: %v", err)
	}

	var p any
	func() {
		defer func() { p = recover() }()
		r.Section(ctx, func([]byte) error { panic("kaboom") })
	}()
	if p != "kaboom" || r.Map() != nil {
		t.Fatalf("another panic: recovered %v, handle maps %v", p, r.Map())
	}
}
