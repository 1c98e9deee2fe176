package tiled

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"
	lapack "gonum.org/v1/gonum/lapack/gonum"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
)

// run factors in this process and fails the test on an error.
func run(t *testing.T, p Params) *Result {
	t.Helper()
	if p.Kernels == nil {
		p.Kernels = slices.Repeat([]string{"gonum"}, p.Grid.Tasks())
	}
	if p.Reps == 0 {
		p.Reps = 1
	}
	res, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestVerifies: factorisations of several sizes (a narrower last tile included) and grids
// verify, with a residual far below the bound, and the first of two is not the faster.
func TestVerifies(t *testing.T) {
	for _, c := range []struct {
		n, nb int
		grid  grid.Grid
	}{{1, 1, grid.Grid{P: 1, Q: 1}}, {10, 3, grid.Grid{P: 2, Q: 1}}, {37, 8, grid.Grid{P: 2, Q: 2}}, {40, 8, grid.Grid{P: 1, Q: 3}}} {
		res := run(t, Params{N: c.n, NB: c.nb, Grid: c.grid, Seed: 5, Reps: 2})
		if !res.Verified || !(res.Residual < 1) || res.Seconds <= 0 || res.FirstSeconds < res.Seconds {
			t.Fatalf("n=%d nb=%d grid %s: %+v", c.n, c.nb, c.grid, res)
		}
	}
}

// TestFactorEqualsLapack compares the factor itself with gonum's Dpotrf on the whole
// matrix: the tiles are factored by the tasks' kernel calls (worker.compute), in the
// order of the schedule, on one goroutine; with tiles below diagonalCut, and above it
// (the panel solved on the halves of its diagonal tile) with a narrower last one.
func TestFactorEqualsLapack(t *testing.T) {
	for _, c := range []struct{ n, nb int }{{29, 6}, {2*diagonalCut + 1 + 3*diagonalCut + 5, 3*diagonalCut + 5}} {
		factorEqualsLapack(t, c.n, c.nb)
	}
}

func factorEqualsLapack(t *testing.T, n, nb int) {
	l := newLayout(n, nb, grid.Grid{P: 1, Q: 1})
	tiles := map[tile][]float64{}
	for j := range l.tiles {
		for i := j; i < l.tiles; i++ {
			a := make([]float64, l.tileLen(tile{i, j}))
			for r := range l.width(i) {
				for c := range l.width(j) {
					a[r*l.width(j)+c] = MatrixA(3, n, i*nb+r, j*nb+c)
				}
			}
			tiles[tile{i, j}] = a
		}
	}
	k, err := kernels.GetCholesky("gonum")
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{l: l, k: k}
	order, _ := l.schedule()
	for _, o := range order {
		var in [2][]float64
		for x, rt := range o.reads() {
			in[x] = tiles[rt]
		}
		if err := w.compute(w.k, o, tiles[o.written()], in); err != nil {
			t.Fatal(err)
		}
	}
	full := make([]float64, n*n)
	for i := range n {
		for j := range n {
			full[i*n+j] = MatrixA(3, n, i, j)
		}
	}
	if !(lapack.Implementation{}).Dpotrf(blas.Lower, n, full, n) {
		t.Fatal("gonum: not positive definite")
	}
	for i := range n {
		for j := range i + 1 {
			ti, tj := i/nb, j/nb
			got := tiles[tile{ti, tj}][(i-ti*nb)*l.width(tj)+j-tj*nb]
			if d := math.Abs(got - full[i*n+j]); d > 1e-12*math.Sqrt(float64(n)) {
				t.Fatalf("n=%d nb=%d: L[%d][%d] = %v, LAPACK %v", n, nb, i, j, got, full[i*n+j])
			}
		}
	}
}

// TestVerificationCatchesErrors: a factor with one update left out fails the check.
func TestVerificationCatchesErrors(t *testing.T) {
	skipOp = op{gemm, 3, 1, 0}
	defer func() { skipOp = op{kind: potrf} }()
	res := run(t, Params{N: 32, NB: 4, Grid: grid.Grid{P: 2, Q: 1}, Seed: 1})
	if res.Verified || !(res.Residual > 1e3) {
		t.Fatalf("one update left out: residual %g, verified %v", res.Residual, res.Verified)
	}
}

// TestScheduleIsTopological: the schedule holds every operation once, each after the
// operations it depends on: a tile is read only once final, and written in step order.
func TestScheduleIsTopological(t *testing.T) {
	for _, g := range []grid.Grid{{P: 1, Q: 1}, {P: 2, Q: 1}, {P: 2, Q: 3}} {
		l := newLayout(100, 7, g)
		order, _ := l.schedule()
		if len(order) != len(l.operations()) {
			t.Fatalf("%d operations scheduled of %d", len(order), len(l.operations()))
		}
		seen := map[op]bool{}
		lastWrite := map[tile]op{}
		for _, o := range order {
			if seen[o] {
				t.Fatalf("grid %s: %v twice", g, o)
			}
			seen[o] = true
			for _, rt := range o.reads() {
				if w, ok := lastWrite[rt]; !ok || w.k != rt.j || (w.kind != potrf && w.kind != trsm) {
					t.Fatalf("grid %s: %v reads %v before it is final", g, o, rt)
				}
			}
			if w, ok := lastWrite[o.written()]; ok && w.k != o.k-1 || !ok && o.k != 0 {
				t.Fatalf("grid %s: %v comes after %v on its tile", g, o, w)
			}
			lastWrite[o.written()] = o
		}
	}
}

// lowerTile returns an n×n tile with leading dimension ld holding the lower triangle of
// the matrix of seed (MatrixA), NaN above it and in the padding, and a tile of NaNs of the
// same shape for its inverse.
func lowerTile(seed uint64, n, ld int) (a, inv []float64) {
	a, inv = make([]float64, n*ld), make([]float64, n*ld)
	for i := range n {
		for j := range ld {
			a[i*ld+j], inv[i*ld+j] = math.NaN(), math.NaN()
			if j <= i {
				a[i*ld+j] = MatrixA(seed, n, i, j)
			}
		}
	}
	return a, inv
}

// TestFactorDiagonal: factorDiagonal's L equals gonum's Dpotrf and its L⁻¹ gonum's Dtrtri
// of it, on orders that recurse (odd halves included) with a padded leading dimension;
// with whole false, only the inverses of the two diagonal halves are written above
// diagonalCut (they are L⁻¹'s diagonal blocks); the upper triangles (NaN) are not read nor
// written; a matrix that is not positive definite is refused.
func TestFactorDiagonal(t *testing.T) {
	k, err := kernels.GetCholesky("gonum")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, diagonalCut, diagonalCut + 1, 5*diagonalCut + 3} {
		for _, whole := range []bool{true, false} {
			ld := n + 2
			a, inv := lowerTile(7, n, ld)
			a0, want := slices.Clone(a), slices.Clone(a)
			if !(lapack.Implementation{}).Dpotrf(blas.Lower, n, want, ld) {
				t.Fatal("gonum: not positive definite")
			}
			wantInv := slices.Clone(want)
			if !(lapack.Implementation{}).Dtrtri(blas.Lower, blas.NonUnit, n, wantInv, ld) {
				t.Fatal("gonum: singular")
			}
			if !factorDiagonal(k, n, a, inv, ld, whole) {
				t.Fatalf("n=%d: not positive definite", n)
			}
			h := n // where inv's block below the diagonal halves starts, when it is left out
			if !whole && n > diagonalCut {
				h = n / 2
			}
			for i := range n {
				for j := range ld {
					got, gotInv := a[i*ld+j], inv[i*ld+j]
					if j > i {
						if !math.IsNaN(got) || !math.IsNaN(gotInv) {
							t.Fatalf("n=%d whole=%v: [%d][%d] above the diagonal written", n, whole, i, j)
						}
						continue
					}
					if math.Abs(got-want[i*ld+j]) > 1e-12*math.Sqrt(float64(n)) {
						t.Fatalf("n=%d whole=%v: L[%d][%d] %v; gonum %v", n, whole, i, j, got, want[i*ld+j])
					}
					if i >= h && j < h {
						if !math.IsNaN(gotInv) {
							t.Fatalf("n=%d whole=%v: L⁻¹[%d][%d] below the halves written", n, whole, i, j)
						}
					} else if math.Abs(gotInv-wantInv[i*ld+j]) > 1e-12 {
						t.Fatalf("n=%d whole=%v: L⁻¹[%d][%d] %v; gonum %v", n, whole, i, j, gotInv, wantInv[i*ld+j])
					}
				}
			}
			a0[(n-1)*ld+n-1] = -float64(n) // the last pivot turns negative
			if factorDiagonal(k, n, a0, inv, ld, whole) {
				t.Fatalf("n=%d whole=%v: a matrix that is not positive definite factored", n, whole)
			}
		}
	}
}

// TestSolvePanel: solvePanel with what factorDiagonal(whole false) wrote gives gonum's
// Dtrsm of the panel against Lᵀ, on orders above diagonalCut (odd halves included) and
// not, whichever of a CPU and a GPU kernel wrote the diagonal tile and reads it (a mixed
// job), and with whole true after a GPU kernel, in one Dtrmm per panel.
func TestSolvePanel(t *testing.T) {
	cpu, err := kernels.GetCholesky("gonum")
	if err != nil {
		t.Fatal(err)
	}
	gpu := gpuCounter{cpu, map[string]int{}}
	cases := []struct {
		writer, reader kernels.Cholesky
		whole          bool
	}{{cpu, cpu, false}, {cpu, gpu, false}, {gpu, cpu, false}, {gpu, gpu, false}, {gpu, gpu, true}}
	for _, c := range cases {
		for _, n := range []int{1, diagonalCut, diagonalCut + 1, 5*diagonalCut + 3} {
			const m = 7
			l, inv := lowerTile(9, n, n)
			for x := range inv {
				inv[x] = 0
			}
			if !factorDiagonal(c.writer, n, l, inv, n, false) {
				t.Fatalf("n=%d: not positive definite", n)
			}
			p := make([]float64, m*n)
			for x := range p {
				p[x] = MatrixA(4, m*n, x, 0)
			}
			want := slices.Clone(p)
			(gonumblas.Implementation{}).Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, l, n, want, n)
			clear(gpu.calls)
			solvePanel(c.reader, m, n, p, l, inv, c.whole)
			for x := range p {
				if math.Abs(p[x]-want[x]) > 1e-13*(1+math.Abs(want[x])) {
					t.Fatalf("writer %T, reader %T, whole %v, n=%d: [%d][%d] %v; gonum's Dtrsm %v", c.writer, c.reader, c.whole, n, x/n, x%n, p[x], want[x])
				}
			}
			if c.whole && gpu.calls["trmm"] != 1 {
				t.Fatalf("whole inverse, n=%d: calls %v, want one Dtrmm", n, gpu.calls)
			}
		}
	}
}

// gpuCounter is a Cholesky kernel that says it computes on a GPU and counts the calls of
// each operation.
type gpuCounter struct {
	kernels.Cholesky
	calls map[string]int
}

func (g gpuCounter) Device() kernels.Device { return kernels.GPU }
func (g gpuCounter) Dpotrf(ul blas.Uplo, n int, a []float64, lda int) bool {
	g.calls["potrf"]++
	return g.Cholesky.Dpotrf(ul, n, a, lda)
}
func (g gpuCounter) Dtrtri(ul blas.Uplo, d blas.Diag, n int, a []float64, lda int) bool {
	g.calls["trtri"]++
	return g.Cholesky.Dtrtri(ul, d, n, a, lda)
}
func (g gpuCounter) Dtrmm(s blas.Side, ul blas.Uplo, tA blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	g.calls["trmm"]++
	g.Cholesky.Dtrmm(s, ul, tA, d, m, n, alpha, a, lda, b, ldb)
}
func (g gpuCounter) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	g.calls["syrk"]++
	g.Cholesky.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

// TestFactorDiagonalGPU: on a GPU kernel, factorDiagonal factors a tile far above
// diagonalCut with one Dpotrf and one Dtrtri, giving gonum's L and the whole L⁻¹ bit for
// bit (the same calls) even with whole false, the upper triangles untouched.
func TestFactorDiagonalGPU(t *testing.T) {
	cpu, err := kernels.GetCholesky("gonum")
	if err != nil {
		t.Fatal(err)
	}
	k := gpuCounter{cpu, map[string]int{}}
	const n, ld = 5*diagonalCut + 3, 5*diagonalCut + 5
	a, inv := lowerTile(3, n, ld)
	want := slices.Clone(a)
	if !(lapack.Implementation{}).Dpotrf(blas.Lower, n, want, ld) {
		t.Fatal("gonum: not positive definite")
	}
	wantInv := slices.Clone(want)
	(lapack.Implementation{}).Dtrtri(blas.Lower, blas.NonUnit, n, wantInv, ld)
	if !factorDiagonal(k, n, a, inv, ld, false) {
		t.Fatal("not positive definite")
	}
	if want := map[string]int{"potrf": 1, "trtri": 1}; !maps.Equal(k.calls, want) {
		t.Fatalf("calls %v, want %v", k.calls, want)
	}
	for i := range n {
		for j := range ld {
			if j > i {
				if !math.IsNaN(a[i*ld+j]) || !math.IsNaN(inv[i*ld+j]) {
					t.Fatalf("[%d][%d] above the diagonal written", i, j)
				}
				continue
			}
			if a[i*ld+j] != want[i*ld+j] || inv[i*ld+j] != wantInv[i*ld+j] {
				t.Fatalf("[%d][%d]: L %v, L⁻¹ %v; gonum %v, %v", i, j, a[i*ld+j], inv[i*ld+j], want[i*ld+j], wantInv[i*ld+j])
			}
		}
	}
}

// TestDefaultNB: N/8 within 512 to 1024, never more than N/4, at least 1.
func TestDefaultNB(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{1, 1}, {3, 1}, {100, 25}, {2048, 512}, {4096, 512}, {5000, 625}, {6144, 768}, {8192, 1024}, {20000, 1024},
	} {
		if got := DefaultNB(c.n); got != c.want {
			t.Errorf("DefaultNB(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestGenerateWritesWholeLocation: generate writes every element of a tile's location, the
// second half of a diagonal tile (where POTRF puts L(k,k)⁻¹) included, so that the pages
// of a fresh location are faulted in before the timed factorisation, not in it.
func TestGenerateWritesWholeLocation(t *testing.T) {
	const n, nb = 29, 6
	p := Params{N: n, NB: nb, Seed: 3}
	w := &worker{p: &p, l: newLayout(n, nb, grid.Grid{P: 1, Q: 1})}
	for _, tl := range []tile{{0, 0}, {2, 1}, {4, 4}, {4, 0}} {
		a := make([]float64, w.l.tileLen(tl))
		for x := range a {
			a[x] = math.NaN()
		}
		w.generate(tl, a, false)
		if x := slices.IndexFunc(a, math.IsNaN); x >= 0 {
			t.Errorf("tile %v: element %d of %d not written", tl, x, len(a))
		}
	}
}

// TestTaskStats: task 0 learns every task's measurements, and they add up: the flops of
// all the operations of every factorisation, time computing, and time releasing tiles
// (handing them on, the copies to other processes included) in every task, each of which
// writes and releases tiles.
func TestTaskStats(t *testing.T) {
	const n, nb, reps = 40, 8, 2
	g := grid.Grid{P: 1, Q: 2}
	res := run(t, Params{N: n, NB: nb, Grid: g, Seed: 5, Reps: reps})
	l := newLayout(n, nb, g)
	var want, got float64
	for _, o := range l.operations() {
		want += reps * l.flops(o)
	}
	if len(res.Tasks) != g.Tasks() {
		t.Fatalf("%d tasks' stats, want %d", len(res.Tasks), g.Tasks())
	}
	for k, s := range res.Tasks {
		got += s.Flops
		if s.Compute <= 0 || s.Release <= 0 || s.Wait < 0 {
			t.Errorf("task %d: %+v", k, s)
		}
	}
	if got != want {
		t.Errorf("the tasks' flops add up to %g, want %g", got, want)
	}
}
