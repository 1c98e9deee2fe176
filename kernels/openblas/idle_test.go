package openblas

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"gonum.org/v1/gonum/blas"
)

// idleChildEnv makes the test binary a child of TestPoolStoppedAtLoad that loads the
// library first thing and prints whether OpenBLAS's pool is up.
const idleChildEnv = "ORWL_OPENBLAS_IDLE_CHILD"

// poolUp reports whether OpenBLAS's thread pool is running (its variable
// blas_server_avail); the test skips when the library is missing or does not export it.
func poolUp(t *testing.T) bool {
	t.Helper()
	l, err := load()
	if err != nil {
		t.Skipf("openblas unavailable (apt-get install -y libopenblas0): %v", err)
	}
	h, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := purego.Dlsym(h, "blas_server_avail")
	if err != nil || l.shutdown == nil {
		t.Skipf("%s does not export blas_server_avail and blas_thread_shutdown_: %v", l.path, err)
	}
	return **(**int32)(unsafe.Pointer(&p)) != 0 // p is the variable's address, outside Go's heap
}

// TestPoolStoppedAtLoad: once the library is loaded, the threads OpenBLAS started with it
// are gone (they would spin for a tenth of a second); a fresh process is needed, as the
// library is loaded once.
func TestPoolStoppedAtLoad(t *testing.T) {
	if os.Getenv(idleChildEnv) != "" {
		fmt.Printf("pool up: %v\n", poolUp(t))
		return
	}
	poolUp(t) // skips without the library
	cmd := exec.Command(os.Args[0], "-test.run=^TestPoolStoppedAtLoad$", "-test.v")
	cmd.Env = append(os.Environ(), idleChildEnv+"=1", "OPENBLAS_NUM_THREADS=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "pool up: false") {
		t.Fatalf("after loading, OpenBLAS's pool is still up:\n%s", out)
	}
}

// TestSetThreadsPool: SetThreads(1) ends the pool, a larger count starts it again, and
// products are right either way, also while other goroutines compute during the changes.
func TestSetThreadsPool(t *testing.T) {
	poolUp(t)
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer g.SetThreads(0)
	check := func(what string) {
		t.Helper()
		if err := product(g); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	g.SetThreads(2)
	check("2 threads")
	if !poolUp(t) {
		t.Fatal("SetThreads(2): OpenBLAS's pool is not up")
	}
	g.SetThreads(1)
	if poolUp(t) {
		t.Fatal("SetThreads(1): OpenBLAS's pool is still up")
	}
	check("1 thread")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for range 20 {
				if err := product(g); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for n := range 20 {
		g.SetThreads(1 + n%2)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("product while the threads changed: %v", err)
	}
}

// product multiplies two 256 x 256 matrices of ones (large enough for OpenBLAS to use its
// threads) and checks every entry.
func product(g *Kernel) error {
	const n = 256
	a, c := make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i] = 1
	}
	g.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, a, n, 0, c, n)
	for i, v := range c {
		if v != n {
			return fmt.Errorf("entry %d is %g, want %d", i, v, n)
		}
	}
	return nil
}
