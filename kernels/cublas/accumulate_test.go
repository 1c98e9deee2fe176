package cublas

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestAccumulation adds a chain of products with varied k, scalars and leading dimensions
// to an accumulation, from Go slices and pinned slices, stores C twice in between, and
// compares with gonum; in each way products can go: tile by tile onto an idle GPU, queued
// at once, all pending until Store, and operands over their budget.
func TestAccumulation(t *testing.T) {
	g := kernel(t)
	small(t)
	const m, n = 37, 29
	rnd := rand.New(rand.NewPCG(7, 8))
	fill := func(s []float64) []float64 {
		for i := range s {
			s[i] = 2*rnd.Float64() - 1
		}
		return s
	}
	type product struct {
		k, lda, ldb int
		alpha, beta float64
	}
	chain := []product{{5, 5, n, 1, 0}, {7, 9, n + 2, 0.5, 1}, {3, 3, n, -1, 1}, {11, 12, n, 1, 0.25}, {1, 1, n + 1, 2, 1}}
	ways := []struct {
		name   string
		depth  int
		budget int // 0: as NewAccumulation set it
		tile   bool
	}{{"tiled", 2, 0, true}, {"queued", 2, 0, false}, {"pending", 0, 0, false}, {"budget", 1, 8 * (m*11 + 11*n), false}}
	for _, way := range ways {
		for _, pinned := range []bool{false, true} {
			depth, tile := queueDepth, tileWhenIdle
			queueDepth, tileWhenIdle = way.depth, way.tile
			acc, err := g.NewAccumulation(m, n)
			if err != nil {
				t.Fatal(err)
			}
			if way.budget > 0 {
				acc.(*accumulation).budget = way.budget
			}
			want := make([]float64, m*n)
			alloc := func(l int) []float64 { return hostSlice(t, l, pinned) }
			for i, p := range chain {
				a, b := fill(alloc((m-1)*p.lda+p.k)), fill(alloc((p.k-1)*p.ldb+n))
				gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, p.k, p.alpha, a, p.lda, b, p.ldb, p.beta, want, n)
				if err := acc.Add(p.k, p.alpha, a, p.lda, b, p.ldb, p.beta); err != nil {
					t.Fatal(err)
				}
				fill(a) // Add returned: the operands are no longer read
				fill(b)
				if i == 2 || i == len(chain)-1 {
					const ldc = n + 4
					got := alloc(m * ldc)
					if err := acc.Store(got, ldc); err != nil {
						t.Fatal(err)
					}
					for r := range m {
						near(t, got[r*ldc:r*ldc+n], want[r*n:(r+1)*n], 30)
					}
				}
			}
			queueDepth, tileWhenIdle = depth, tile
			if err := acc.Close(); err != nil {
				t.Fatal(err)
			}
			if err := acc.Close(); err != nil {
				t.Fatalf("%s, pinned %v: second Close: %v", way.name, pinned, err)
			}
			if err := acc.Add(1, 1, make([]float64, m), 1, make([]float64, n), n, 0); err == nil {
				t.Fatalf("%s: Add after Close: no error", way.name)
			}
		}
	}
}

// TestAccumulationBadInput: sizes and slices that do not fit are errors naming them,
// before anything is queued, and leave the accumulation usable.
func TestAccumulationBadInput(t *testing.T) {
	g := kernel(t)
	if _, err := g.NewAccumulation(0, 3); err == nil {
		t.Fatal("NewAccumulation(0, 3): no error")
	}
	acc, err := g.NewAccumulation(4, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	a, b, c := make([]float64, 8), make([]float64, 6), make([]float64, 12)
	for _, bad := range []struct {
		name string
		err  error
	}{
		{"k 0", acc.Add(0, 1, a, 2, b, 3, 0)},
		{"lda < k", acc.Add(2, 1, a, 1, b, 3, 0)},
		{"ldb < n", acc.Add(2, 1, a, 2, b, 2, 0)},
		{"short a", acc.Add(2, 1, a[:7], 2, b, 3, 0)},
		{"short b", acc.Add(2, 1, a, 2, b[:5], 3, 0)},
		{"ldc < n", acc.Store(c, 2)},
		{"short c", acc.Store(c[:11], 3)},
	} {
		if bad.err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
	if err := acc.Add(2, 1, a, 2, b, 3, 0); err != nil {
		t.Fatalf("after bad input: %v", err)
	}
	if err := acc.Store(c, 3); err != nil {
		t.Fatal(err)
	}
}
