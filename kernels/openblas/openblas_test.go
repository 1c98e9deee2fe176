package openblas_test

import (
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/kernelstest"
	"github.com/orwl-go/orwl/kernels/openblas"
)

// kernel returns the OpenBLAS kernel or skips the test when the library is
// not installed.
func kernel(t *testing.T) *openblas.Kernel {
	t.Helper()
	g, err := openblas.New()
	if err != nil {
		t.Skipf("openblas unavailable (apt-get install -y libopenblas0): %v", err)
	}
	return g
}

func TestDgemm(t *testing.T) {
	g := kernel(t)
	path, config := g.Library()
	t.Logf("library %s: %s", path, config)
	kernelstest.Dgemm(t, g)
}

func TestDgemmOneThread(t *testing.T) {
	g := kernel(t)
	defer g.SetThreads(0)
	if err := g.SetThreads(1); err != nil {
		t.Fatal(err)
	}
	kernelstest.Dgemm(t, g)
}

func TestInvalid(t *testing.T) { kernelstest.Invalid(t, kernel(t)) }

func TestCholesky(t *testing.T) { kernelstest.Cholesky(t, kernel(t)) }

func TestCholeskyOneThread(t *testing.T) {
	g := kernel(t)
	defer g.SetThreads(0)
	if err := g.SetThreads(1); err != nil {
		t.Fatal(err)
	}
	kernelstest.Cholesky(t, g)
}

// TestGetCholesky: the registry's openblas kernel has the Cholesky operations.
func TestGetCholesky(t *testing.T) {
	kernel(t)
	if _, err := kernels.GetCholesky(openblas.Name); err != nil {
		t.Fatal(err)
	}
}

func TestThreads(t *testing.T) {
	g := kernel(t)
	def := g.Threads()
	if def < 1 {
		t.Fatalf("default Threads() = %d", def)
	}
	if err := g.SetThreads(1); err != nil || g.Threads() != 1 {
		t.Fatalf("SetThreads(1): err %v, Threads() = %d", err, g.Threads())
	}
	// The setting is process-wide: another kernel sees it.
	if h := kernel(t); h.Threads() != 1 {
		t.Fatalf("second kernel Threads() = %d, want 1", h.Threads())
	}
	if err := g.SetThreads(0); err != nil || g.Threads() != def {
		t.Fatalf("SetThreads(0): err %v, Threads() = %d, want %d", err, g.Threads(), def)
	}
}

func TestRegistered(t *testing.T) {
	g, err := kernels.Get(openblas.Name)
	if err != nil {
		if strings.Contains(err.Error(), "libopenblas not found") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if g.Name() != "openblas" || g.Device() != kernels.CPU {
		t.Fatalf("Get(openblas) = %s on %v", g.Name(), g.Device())
	}
}

// TestConcurrent calls one Kernel from several goroutines at once, as
// several ORWL tasks of a process would, and checks every result.
func TestConcurrent(t *testing.T) {
	g := kernel(t)
	const n = 96
	a, b := make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i] = float64(i%11)-5, float64(i%7)-3
	}
	want := make([]float64, n*n)
	gonumblas.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, n, n, n, 1, a, n, b, n, 0, want, n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			c := make([]float64, n*n)
			for range 20 {
				g.Dgemm(blas.NoTrans, blas.Trans, n, n, n, 1, a, n, b, n, 0, c, n)
				for i := range c {
					if c[i] != want[i] { // small integers: exact
						t.Errorf("concurrent Dgemm: c[%d] = %v, want %v", i, c[i], want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
