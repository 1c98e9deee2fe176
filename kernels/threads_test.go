package kernels_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/orwl-go/orwl/kernels"
)

// threadsSet records the SetThreads calls of the "test-threads" kernel.
var threadsSet atomic.Int64

type countingKernel struct{ fake }

func (countingKernel) SetThreads(n int) error {
	threadsSet.Add(int64(n))
	return nil
}

func init() {
	kernels.Register(kernels.Plugin{
		Name: "test-threads", Device: kernels.CPU, Priority: -10,
		Check: func() error { return nil },
		New:   func() (kernels.Gemm, error) { return countingKernel{fake{name: "test-threads"}}, nil },
	})
}

// TestSetCPUThreads: each CPU kernel is set once however often it is named, a kernel that
// refuses with ErrThreads (gonum) is no error, and an unknown name is.
func TestSetCPUThreads(t *testing.T) {
	threadsSet.Store(0)
	if err := kernels.SetCPUThreads([]string{"test-threads", "gonum", "test-threads"}, 3); err != nil {
		t.Fatal(err)
	}
	if got := threadsSet.Load(); got != 3 {
		t.Fatalf("SetThreads called with a total of %d, want one call with 3", got)
	}
	if err := kernels.SetCPUThreads([]string{"gonum", "no-such-kernel"}, 1); !errors.Is(err, kernels.ErrUnknown) {
		t.Fatalf("unknown kernel: err %v, want ErrUnknown", err)
	}
}
