package cublas

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/kernelstest"
)

// kernel returns a fresh Kernel closed at the end of the test, or skips the
// test with the reason the GPU cannot be used.
func kernel(t *testing.T) *Kernel {
	t.Helper()
	if err := Load(); err != nil {
		t.Skipf("cublas unavailable: %v", err)
	}
	g, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func TestDevice(t *testing.T) {
	kernel(t)
	rt, bl, _ := Libraries()
	name, err := DeviceName(0)
	n, _ := DeviceCount()
	t.Logf("%d device(s), device 0 %q (err %v); %s, %s", n, name, err, rt, bl)
}

func TestDgemm(t *testing.T) { kernelstest.Dgemm(t, kernel(t)) }

func TestInvalid(t *testing.T) { kernelstest.Invalid(t, kernel(t)) }

// small makes the pipeline use several panels and several staging chunks
// per panel on small matrices.
func small(t *testing.T) {
	pb, sb := panelBytes, slotBytes
	panelBytes, slotBytes = 64<<10, 16<<10
	t.Cleanup(func() { panelBytes, slotBytes = pb, sb })
}

// TestPipeline checks the multi-panel, multi-chunk path against gonum for
// Go slices and pinned slices, all transposes, padded leading dimensions.
func TestPipeline(t *testing.T) {
	g := kernel(t)
	small(t)
	const m, n, k, pad = 301, 203, 157, 5
	rnd := rand.New(rand.NewPCG(3, 4))
	fill := func(s []float64) {
		for i := range s {
			s[i] = 2*rnd.Float64() - 1
		}
	}
	for _, pin := range []bool{false, true} {
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				ra, ca := m, k
				if tA == blas.Trans {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tB == blas.Trans {
					rb, cb = n, k
				}
				lda, ldb, ldc := ca+pad, cb+pad, n+pad
				alloc := func(l int) []float64 { return hostSlice(t, l, pin) }
				a, b, c := alloc(ra*lda), alloc(rb*ldb), alloc(m*ldc)
				fill(a)
				fill(b)
				fill(c)
				want := append([]float64(nil), c...)
				gonum.Implementation{}.Dgemm(tA, tB, m, n, k, 1.5, a, lda, b, ldb, -0.5, want, ldc)
				g.Dgemm(tA, tB, m, n, k, 1.5, a, lda, b, ldb, -0.5, c, ldc)
				if isPinned(a) != pin {
					t.Fatalf("isPinned = %v, want %v", !pin, pin)
				}
				near(t, c, want, k)
			}
		}
	}
}

// hostSlice returns l float64s of Go memory, or of pinned memory (AllocHost) freed at the
// end of the test.
func hostSlice(t *testing.T, l int, pinned bool) []float64 {
	t.Helper()
	if !pinned {
		return make([]float64, l)
	}
	s, err := AllocHost(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { FreeHost(s) })
	return s
}

// near compares element-wise, up to rounding of k-term sums of products of
// values in [-1, 1).
func near(t *testing.T, got, want []float64, k int) {
	t.Helper()
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > 1e-14*float64(k+2)*4 {
			t.Fatalf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestMatrix uploads once, multiplies several times, downloads once.
func TestMatrix(t *testing.T) {
	g := kernel(t)
	small(t)
	const m, n, k = 70, 50, 90
	rnd := rand.New(rand.NewPCG(5, 6))
	rand := func(l int) []float64 {
		s := make([]float64, l)
		for i := range s {
			s[i] = 2*rnd.Float64() - 1
		}
		return s
	}
	ha, hb, hc := rand(k*m), rand(n*k), rand(m*n) // A stored k×m, B n×k: use Trans
	want := append([]float64(nil), hc...)
	for range 3 {
		gonum.Implementation{}.Dgemm(blas.Trans, blas.Trans, m, n, k, 0.5, ha, m, hb, k, 1, want, n)
	}
	a, err := g.NewMatrix(k, m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.NewMatrix(n, k)
	c, _ := g.NewMatrix(m, n)
	for _, up := range []struct {
		mat *Matrix
		s   []float64
	}{{a, ha}, {b, hb}, {c, hc}} {
		if err := up.mat.Upload(up.s, up.mat.Cols()); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := g.Gemm(blas.Trans, blas.Trans, 0.5, a, b, 1, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, m*(n+3))
	if err := c.Download(got, n+3); err != nil {
		t.Fatal(err)
	}
	for i := range m {
		near(t, got[i*(n+3):i*(n+3)+n], want[i*n:(i+1)*n], 3*k)
	}
	if err := g.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 0, c); err == nil {
		t.Fatal("Gemm with mismatched shapes: no error")
	}
	if err := a.Upload(ha[:10], m); err == nil {
		t.Fatal("Upload of a short slice: no error")
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); err == nil {
		t.Fatal("double Free: no error")
	}
}

func TestRegisterHost(t *testing.T) {
	g := kernel(t)
	a, b, c := make([]float64, 64*64), make([]float64, 64*64), make([]float64, 64*64)
	for i := range a {
		a[i], b[i] = float64(i%7), float64(i%5)
	}
	for _, s := range [][]float64{a, b, c} {
		if err := RegisterHost(s); err != nil {
			t.Fatal(err)
		}
	}
	if !isPinned(a[64:128]) {
		t.Fatal("sub-slice of a registered slice not seen as pinned")
	}
	want := make([]float64, len(c))
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, 64, 64, 64, 1, a, 64, b, 64, 0, want, 64)
	g.Dgemm(blas.NoTrans, blas.NoTrans, 64, 64, 64, 1, a, 64, b, 64, 0, c, 64)
	near(t, c, want, 64)
	for _, s := range [][]float64{a, b, c} {
		if err := UnregisterHost(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := UnregisterHost(a); !errors.Is(err, ErrHostNotPinned) {
		t.Fatalf("second UnregisterHost = %v, want ErrHostNotPinned", err)
	}
}

// The kernel offers pinning through kernels.HostPinner, found by type assertion on the
// Gemm that the registry returns; a slice pinned by one kernel stays pinned after its Close
// and is unpinned by another.
func TestHostPinner(t *testing.T) {
	if err := Load(); err != nil {
		t.Skipf("cublas unavailable: %v", err)
	}
	g, err := kernels.Get(Name)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := g.(kernels.HostPinner)
	if !ok {
		t.Fatalf("%T does not implement kernels.HostPinner", g)
	}
	s := make([]float64, 1024)
	if err := p.PinHost(s); err != nil {
		t.Fatal(err)
	}
	if err := p.PinHost(s); err == nil {
		t.Error("pinning pinned memory again: no error")
	}
	g.(io.Closer).Close()
	if !isPinned(s) {
		t.Fatal("a pinned slice is not pinned after Close of its kernel")
	}
	if err := kernel(t).UnpinHost(s); err != nil {
		t.Fatal(err)
	}
	if err := p.UnpinHost(s); !errors.Is(err, ErrHostNotPinned) {
		t.Fatalf("second UnpinHost = %v, want ErrHostNotPinned", err)
	}
}

func TestClosed(t *testing.T) {
	g := kernel(t)
	g.Close()
	if err := g.DgemmErr(blas.NoTrans, blas.NoTrans, 1, 1, 1, 1, []float64{1}, 1, []float64{1}, 1, 0, []float64{0}, 1); err == nil {
		t.Fatal("DgemmErr on a closed kernel: no error")
	}
}

// TestUnavailable checks the registry's error where there is no GPU or
// library; it runs everywhere else only as a check of Get.
func TestUnavailable(t *testing.T) {
	g, err := kernels.Get(Name)
	if Load() == nil {
		if err != nil {
			t.Fatal(err)
		}
		if g.Device() != kernels.GPU {
			t.Fatal("device is not GPU")
		}
		g.(*Kernel).Close()
		return
	}
	if !errors.Is(err, kernels.ErrUnavailable) || !strings.Contains(err.Error(), "libcu") && !errors.As(err, new(CUDAError)) {
		t.Fatalf("Get(cublas) = %v, want ErrUnavailable with the reason", err)
	}
	t.Logf("as expected here: %v", err)
}

func TestErrorNames(t *testing.T) {
	if got := StatusAllocFailed.Error(); got != "cublas: CUBLAS_STATUS_ALLOC_FAILED (3)" {
		t.Fatalf("StatusAllocFailed.Error() = %q", got)
	}
	if got := ErrMemoryAllocation.Error(); !strings.Contains(got, "2") {
		t.Fatalf("ErrMemoryAllocation.Error() = %q", got)
	}
	if Load() == nil && !strings.Contains(ErrNoDevice.Error(), "cudaErrorNoDevice") {
		t.Fatalf("ErrNoDevice.Error() = %q", ErrNoDevice.Error())
	}
}

func TestCholesky(t *testing.T) { kernelstest.Cholesky(t, kernel(t)) }

// TestCholeskyStaged runs the Cholesky suite with transfers staged in several chunks.
func TestCholeskyStaged(t *testing.T) {
	g := kernel(t)
	small(t)
	kernelstest.Cholesky(t, g)
}
