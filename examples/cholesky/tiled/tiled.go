// Package tiled factors an N x N symmetric positive definite float64 matrix, A = L·Lᵀ,
// as a tiled Cholesky factorisation over the tasks of an ORWL job; it is the engine of the
// cholesky example and of the bench harness's cholesky rows.
//
// # Distribution
//
// A is cut into NB x NB tiles (the last row and column of tiles may be narrower); only the
// lower triangle of tiles is stored, each tile in a location of its own, owned 2-D
// block-cyclically over a P x Q grid of tasks as ScaLAPACK deals blocks: tile (i, j)
// belongs to task (i mod P, j mod Q) and is its location "t<i/P>.<j/Q>". A is generated
// tile by tile by its owner, so nothing is sent to set up, and L overwrites it.
//
// # Algorithm
//
// The right-looking algorithm: at step k, POTRF factors the diagonal tile (k, k), TRSM
// turns each tile (i, k) below it into L(i, k), and the trailing matrix is updated, SYRK
// on the diagonal tiles (j, j) and GEMM on the others (i, j), A(i, j) -= L(i, k)·L(j, k)ᵀ.
// Each operation is done by the owner of the tile it writes, inside sections of one-shot
// handles on the tiles it reads and the tile it writes. Tiles of other processes are
// pushed into local mirrors when their last write is released, once per process.
//
// The panel is the critical path, and a triangular solve runs at a third of GEMM's rate
// on one core. So POTRF also inverts the two diagonal halves of L(k, k) (both on halves,
// recursively, with TRMM and SYRK: factorDiagonal), the location of a diagonal tile holds
// L(k, k) and then L11⁻¹ and L22⁻¹, and TRSM is A(i, k)·L(k, k)⁻ᵀ on the columns of the
// halves, two triangular products and a GEMM (solvePanel, near GEMM's rate); the block of
// L(k, k)⁻¹ below the halves, which would cost a third of POTRF's time, is not needed. (A
// GPU kernel inverts the whole tile in one call; TRSM multiplies with all of it in one
// call where every task computes on that kernel, and on the halves in a mixed job.)
// Products with explicit inverses make the error grow with the condition number of the
// diagonal blocks instead of being backward stable; the residual check below bounds the
// result of every run.
//
// # Schedule
//
// The order of the operations is fixed before the factorisation, identically in every
// task, by a simulated run (schedule): every task executes its own operations one at a
// time and, when free, starts the ready one with the longest path to the end (the
// critical path first: the panel factorisation and the updates the next panels need come
// before the trailing updates that can wait, a lookahead as deep as the simulated run
// finds useful). The rank of an operation's start in that run is the FIFO position of all
// its handles. Since start times respect every dependence, each location's FIFO holds its
// accesses in the order of the algorithm, and every access waits only for accesses of
// smaller positions. A task waits only for its first operation not done, in order of
// position, taking its handles in that order and nesting only handles of one position; but
// when one of its next operations has all its tiles granted already (Handle.Test), it runs
// that one first, which takes only grants that are there and gives them back: the real
// machine's timing fills the gaps of the simulated one. The factorisation cannot deadlock,
// and the order of the conflicting accesses, so L, is the same bit for bit whatever the
// timing or the number of processes.
//
// The simulated run also says which operations run while every other task waits: the
// first panel's diagonal tile and solve, before anything else can start, and the last
// update and diagonal tile (on a 1x2 grid of 8 x 8 tiles, 87% of the simulated run's idle
// core time is beside them, 3% of its time). Where the process may run twice its
// kernel's threads (GOMAXPROCS), as on a host with a core per task and one kernel thread
// each, a task runs those on two threads, its products cut in two by rows (split): the
// cores of the tasks that wait would be idle. Which operations these are depends only on
// the layout, so L stays the same whatever the timing or the number of processes.
//
// # Repetitions and verification
//
// With Reps > 1 the factorisation is repeated on a fresh A: every task writes its tiles
// again (their FIFO puts that after the last reads of the previous factorisation), then
// all tasks meet in a barrier made of locations ("ready", then task 0's "go"), so that a
// factorisation's time, from the barrier to the last operation of its slowest task, is
// its own. After the last one, the result is checked without forming L·Lᵀ: with a random
// vector x, every task adds its tiles' part of z = Lᵀ·x (location "z"), every task sums
// the parts, and then its part of y = L·z and of A·x (computed while A was generated);
// task 0 gathers them ("out") and computes the scaled residual (see Result.Residual).
//
// This package computes and checks; it must not print, parse flags or start processes.
package tiled

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// Params describe one job.
type Params struct {
	N, NB int
	Grid  grid.Grid
	// Kernels names the kernel of every task (len Grid.Tasks()), as kernels.GetCholesky
	// takes them.
	Kernels []string
	Reps    int    // factorisations, one after the other (at least 1)
	Seed    uint64 // generates A and the verification vector
	// Job and Place are passed to orwl.Config; nil means discovered and contiguous.
	Job   *orwl.Job
	Place func(task, procs int) int
	// Progress, when not nil, is called by task 0 after each of its operations.
	Progress func(done, total int)
	Logger   *slog.Logger
	// Trace is passed to orwl.Config.Trace: a file for the job's Chrome trace (rank 0).
	Trace string
}

// TaskStats are the measurements of one task over all factorisations.
type TaskStats struct {
	Compute time.Duration // inside kernel calls
	Wait    time.Duration // blocked acquiring tiles
	// Release is the time spent releasing tiles: handing each on to its next holder, a
	// message (and the wake-up of a reader that sleeps) when that is a task of another
	// process, which reads the tile in place on this host and gets a copy from another.
	Release time.Duration
	Flops   float64
}

// Result is what task 0 learns at the end. Only the process that runs task 0 gets one.
type Result struct {
	// Seconds is the time of the fastest factorisation: from the barrier that starts it to
	// the end of its slowest task's last operation. FirstSeconds is the first one's.
	Seconds, FirstSeconds float64
	// GFlops and FirstGFlops are N³/3 divided by Seconds and FirstSeconds, in GFLOP/s.
	GFlops, FirstGFlops float64
	Procs               int
	// Residual is ‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε), with ‖A − L·Lᵀ‖_F estimated without forming
	// L·Lᵀ as √N·‖A·x − L·(Lᵀ·x)‖₂/‖x‖₂ for a random x of entries uniform in [-1, 1) (the
	// mean of ‖E·x‖² is ‖E‖_F²·‖x‖²/N).
	Residual float64
	// Verified: Residual < ResidualBound.
	Verified bool
	Checksum uint64 // hash of the bits of L, identical across process counts
	Tasks    []TaskStats
}

// ResidualBound is the largest Residual accepted: 30, the threshold LAPACK's test suite
// applies to its scaled residuals (TESTING/dtest.in). A backward stable factorisation
// gives values far below 1.
const ResidualBound = 30

// Flops returns the floating-point operations of one factorisation of order n: n³/3.
func Flops(n int) float64 { return float64(n) * float64(n) * float64(n) / 3 }

// MaxTasks bounds the tasks of a job, as summa.MaxTasks.
const MaxTasks = summa.MaxTasks

// DefaultGrid is the grid of tasks tasks used unless told otherwise: the most square, with
// at least as many columns as rows. Dealt by column, the work of the lower triangle is
// balanced (by row, the tasks of the last rows have more of it): at N=4096 on 2 tasks, 1x2
// ran 5-10% faster than 2x1.
func DefaultGrid(tasks int) grid.Grid {
	return grid.Square(tasks).Transpose()
}

// DefaultNB is the tile size used unless told otherwise: N/8, at least 512 and at most
// 1024 (eight tiles a side from N = 4096 to 8192), but never more than N/4, so that a
// factorisation has at least four tiles a side to overlap. Larger tiles run the updates
// faster (OpenBLAS's one-thread dgemm gains several percent from 512 to 1024) and halve
// the messages, smaller ones shorten the start and the end where one task waits for the
// other's panel: on the 2-core VM, 2 processes of one thread, N = 8192 ran 10-15% faster
// with NB 1024 than with 512, and N = 4096 no faster with 768 or 1024 than with 512
// (bench cholesky -nb compares others).
func DefaultNB(n int) int { return max(1, min(n/4, max(512, min(1024, n/8)))) }

// BytesPerTask estimates the memory one task holds, in bytes: its share of the lower
// triangle of tiles and of the inverted diagonal tiles, and as much again for the mirrors
// of tiles of other processes.
func BytesPerTask(n, nb int, g grid.Grid) float64 {
	t := float64((n + nb - 1) / nb)
	fnb := float64(min(nb, n))
	return 2 * 8 * fnb * fnb * (t*(t+1)/2 + t) / float64(g.Tasks())
}

func (p *Params) check() error {
	switch {
	case p.N < 1:
		return fmt.Errorf("tiled: n is %d; need n >= 1", p.N)
	case p.NB < 1:
		return fmt.Errorf("tiled: nb is %d; need nb >= 1", p.NB)
	case p.Grid.P < 1 || p.Grid.Q < 1 || p.Grid.Tasks() > MaxTasks:
		return fmt.Errorf("tiled: grid %s; need P, Q >= 1 and at most %d tasks", p.Grid, MaxTasks)
	case len(p.Kernels) != p.Grid.Tasks():
		return fmt.Errorf("tiled: %d kernel names for %d tasks", len(p.Kernels), p.Grid.Tasks())
	case p.Reps < 1:
		return fmt.Errorf("tiled: reps is %d; need reps >= 1", p.Reps)
	}
	return nil
}

// Run runs the job; in every process it returns when the whole job is done. The process
// that runs task 0 gets the Result, the others nil.
func Run(ctx context.Context, p Params) (*Result, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	l := newLayout(p.N, p.NB, p.Grid)
	order, alone := l.schedule()
	var res *Result
	cfg := orwl.Config{
		Tasks:     p.Grid.Tasks(),
		Locations: append(l.tileNames(), "ready", "go", "z", "out"),
		Job:       p.Job,
		Place:     p.Place,
		Logger:    p.Logger,
		Trace:     p.Trace,
	}
	err := orwl.Run(ctx, cfg, func(ctx context.Context, t *orwl.Task) error {
		k, err := kernels.GetCholesky(p.Kernels[t.ID()])
		if err != nil {
			return fmt.Errorf("task %d: %w", t.ID(), err)
		}
		if c, ok := k.(io.Closer); ok {
			defer c.Close()
		}
		mixed := slices.ContainsFunc(p.Kernels, func(name string) bool { return name != p.Kernels[t.ID()] })
		w := &worker{p: &p, l: l, t: t, me: t.ID(), k: k, wholeInverse: !mixed && k.Device() == kernels.GPU}
		r, err := w.run(ctx, order, alone)
		if r != nil {
			r.Procs = t.NumProcs()
			res = r
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// tileNames are the names of the tile locations every task has: one per tile a task of
// the grid may own, (i/P, j/Q) for tile (i, j).
func (l layout) tileNames() []string {
	rows, cols := (l.tiles+l.grid.P-1)/l.grid.P, (l.tiles+l.grid.Q-1)/l.grid.Q
	names := make([]string, 0, rows*cols)
	for li := range rows {
		for lj := range cols {
			names = append(names, fmt.Sprintf("t%d.%d", li, lj))
		}
	}
	return names
}

// tileName names the location of tile t.
func (l layout) tileName(t tile) string {
	return fmt.Sprintf("t%d.%d", t.i/l.grid.P, t.j/l.grid.Q)
}

// Streams of generated values (summa.Element): A and the verification vector.
const (
	streamA uint64 = 11
	streamX uint64 = 12
)

// MatrixA returns entry (i, j) of the job's matrix: N on the diagonal, and off it a value
// uniform in [-1, 1), symmetric. Every row's off-diagonal entries add up to less than N-1
// in absolute value, so A is strictly diagonally dominant with a positive diagonal:
// symmetric positive definite.
func MatrixA(seed uint64, n, i, j int) float64 {
	if i == j {
		return float64(n)
	}
	return summa.Element(seed, streamA, n, max(i, j), min(i, j))
}

// vectorX returns entry i of the verification vector.
func vectorX(seed uint64, i int) float64 { return summa.Element(seed, streamX, 1, 0, i) }
