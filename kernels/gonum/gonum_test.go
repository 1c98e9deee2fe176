package gonum_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/gonum"
	"github.com/orwl-go/orwl/kernels/kernelstest"
)

func TestDgemm(t *testing.T) { kernelstest.Dgemm(t, gonum.Kernel{}) }

func TestInvalid(t *testing.T) { kernelstest.Invalid(t, gonum.Kernel{}) }

func TestThreads(t *testing.T) {
	g := gonum.Kernel{}
	p := runtime.GOMAXPROCS(0)
	if g.Threads() != p {
		t.Fatalf("Threads() = %d, want GOMAXPROCS %d", g.Threads(), p)
	}
	if err := g.SetThreads(0); err != nil {
		t.Fatal(err)
	}
	if err := g.SetThreads(p); err != nil {
		t.Fatal(err)
	}
	if err := g.SetThreads(p + 1); !errors.Is(err, kernels.ErrThreads) {
		t.Fatalf("SetThreads(%d) = %v, want ErrThreads", p+1, err)
	}
}

func TestCholesky(t *testing.T) { kernelstest.Cholesky(t, gonum.Kernel{}) }
