package kernels_test

import (
	"errors"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/gonum"
)

// fake is a registered test kernel delegating to gonum.
type fake struct {
	gonum.Kernel
	name string
}

func (f fake) Name() string { return f.name }

func init() {
	// A plugin that is never available, ranked above everything: Auto must
	// skip it and Get must report its reason.
	kernels.Register(kernels.Plugin{
		Name: "test-missing", Device: kernels.GPU, Priority: 1000,
		Check: func() error { return errors.New("libmissing.so not found in /nowhere") },
		New:   func() (kernels.Gemm, error) { panic("New called on an unavailable plugin") },
	})
	kernels.Register(kernels.Plugin{
		Name: "test-fast", Device: kernels.CPU, Priority: 500,
		Check: func() error { return nil },
		New:   func() (kernels.Gemm, error) { return fake{name: "test-fast"}, nil },
	})
	kernels.Register(kernels.Plugin{
		Name: "test-gemm-only", Device: kernels.CPU, Priority: -1,
		Check: func() error { return nil },
		New:   func() (kernels.Gemm, error) { return gemmOnly{gonum.Kernel{}}, nil },
	})
}

func TestGetDefault(t *testing.T) {
	for _, name := range []string{"", kernels.Default, "gonum"} {
		g, err := kernels.Get(name)
		if err != nil || g.Name() != "gonum" || g.Device() != kernels.CPU {
			t.Fatalf("Get(%q) = %v, %v", name, g, err)
		}
	}
}

func TestAuto(t *testing.T) {
	avail := kernels.Available()
	if len(avail) == 0 || avail[0] != "test-fast" {
		t.Fatalf("Available() = %v, want test-fast first", avail)
	}
	for _, name := range avail {
		if name == "test-missing" {
			t.Fatal("unavailable plugin listed as available")
		}
	}
	g, err := kernels.Get(kernels.Auto)
	if err != nil || g.Name() != "test-fast" {
		t.Fatalf("Get(auto) = %v, %v", g, err)
	}
}

func TestAvailableOn(t *testing.T) {
	cpu := kernels.AvailableOn(kernels.CPU)
	if len(cpu) == 0 || cpu[0] != "test-fast" {
		t.Fatalf("AvailableOn(CPU) = %v, want test-fast first", cpu)
	}
	for _, name := range kernels.AvailableOn(kernels.GPU) {
		if name == "test-missing" || name == "test-fast" || name == "gonum" {
			t.Fatalf("AvailableOn(GPU) lists %s", name)
		}
	}
}

func TestUnavailable(t *testing.T) {
	_, err := kernels.Get("test-missing")
	if !errors.Is(err, kernels.ErrUnavailable) || !strings.Contains(err.Error(), "libmissing.so not found") {
		t.Fatalf("Get(test-missing) = %v, want ErrUnavailable with the reason", err)
	}
}

func TestUnknown(t *testing.T) {
	_, err := kernels.Get("nosuch")
	if !errors.Is(err, kernels.ErrUnknown) || !strings.Contains(err.Error(), "gonum") {
		t.Fatalf("Get(nosuch) = %v, want ErrUnknown listing registered names", err)
	}
}

func TestRegisterInvalid(t *testing.T) {
	for _, p := range []kernels.Plugin{
		{Name: "gonum", Check: func() error { return nil }, New: func() (kernels.Gemm, error) { return nil, nil }},
		{Name: "", Check: func() error { return nil }, New: func() (kernels.Gemm, error) { return nil, nil }},
		{Name: kernels.Auto, Check: func() error { return nil }, New: func() (kernels.Gemm, error) { return nil, nil }},
		{Name: "test-nil"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", p.Name)
				}
			}()
			kernels.Register(p)
		}()
	}
}

func TestRegistered(t *testing.T) {
	ps := kernels.Registered()
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Priority < ps[i].Priority {
			t.Fatalf("Registered() not sorted by priority: %v before %v", ps[i-1].Name, ps[i].Name)
		}
	}
}

func TestDeviceString(t *testing.T) {
	if kernels.CPU.String() != "cpu" || kernels.GPU.String() != "gpu" || kernels.Device(7).String() != "Device(7)" {
		t.Fatal("Device.String")
	}
}

// TestCheckDgemm checks the quick-return answers of CheckDgemm; its panics
// are compared with gonum's by every plugin's kernelstest.Invalid run.
func TestCheckDgemm(t *testing.T) {
	a, b, c := make([]float64, 4), make([]float64, 4), make([]float64, 4)
	for _, tc := range []struct {
		m, n, k     int
		alpha, beta float64
		want        bool
	}{
		{2, 2, 2, 1, 0, true},
		{0, 2, 2, 1, 0, false},
		{2, 0, 2, 1, 0, false},
		{2, 2, 0, 1, 1, false},
		{2, 2, 0, 1, 0.5, true},
		{2, 2, 2, 0, 1, false},
		{2, 2, 2, 0, 0, true},
	} {
		lda := max(1, tc.k)
		if got := kernels.CheckDgemm(blas.NoTrans, blas.NoTrans, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, 2, tc.beta, c, 2); got != tc.want {
			t.Errorf("CheckDgemm(m=%d n=%d k=%d alpha=%g beta=%g) = %v, want %v", tc.m, tc.n, tc.k, tc.alpha, tc.beta, got, tc.want)
		}
	}
}

// TestGetCholesky: gonum has the Cholesky operations; a kernel with Gemm only is refused
// with ErrUnsupported, and an unknown name with Get's error.
func TestGetCholesky(t *testing.T) {
	if g, err := kernels.GetCholesky("gonum"); err != nil || g.Name() != "gonum" {
		t.Fatalf("GetCholesky(gonum) = %v, %v", g, err)
	}
	if _, err := kernels.GetCholesky("test-gemm-only"); !errors.Is(err, kernels.ErrUnsupported) {
		t.Fatalf("GetCholesky(test-gemm-only) = %v, want ErrUnsupported", err)
	}
	if _, err := kernels.GetCholesky("nosuch"); !errors.Is(err, kernels.ErrUnknown) {
		t.Fatalf("GetCholesky(nosuch) = %v, want ErrUnknown", err)
	}
}

// gemmOnly is a kernel with Dgemm and nothing else.
type gemmOnly struct{ g kernels.Gemm }

func (k gemmOnly) Dgemm(tA, tB blas.Transpose, m, n, kk int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	k.g.Dgemm(tA, tB, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc)
}
func (gemmOnly) Name() string             { return "test-gemm-only" }
func (gemmOnly) Device() kernels.Device   { return kernels.CPU }
func (gemmOnly) Threads() int             { return 1 }
func (k gemmOnly) SetThreads(n int) error { return nil }
