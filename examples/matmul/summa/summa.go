// Package summa multiplies two N x N float64 matrices distributed 2-D block-cyclically over
// the tasks of an ORWL job, with the SUMMA algorithm; it is the engine of the matmul
// example and of the bench harness's matmul rows.
//
// # Distribution
//
// The tasks form a P x Q grid (task (p, q) has id p*Q+q). A, B and C are cut into NB x NB
// blocks (the last row and column of blocks may be narrower) dealt round-robin as in
// ScaLAPACK: block (I, J) belongs to task (I mod P, J mod Q). A task stores its part of A as
// column panels (its rows of one block column), its part of B as row panels (one block row,
// its columns) and its part of C as one row-major matrix. A and B are generated entry by
// entry from the seed, so every task builds its own blocks and nothing is sent to set up.
//
// # Algorithm
//
// C = sum over k of A(:, k) B(k, :), one block column k of A and block row k of B per step.
// At step k the tasks of grid column k mod Q own the pieces of A's panel k and the tasks of
// grid row k mod P own the pieces of B's panel k; each owner publishes its piece in a
// location that the tasks of its grid row (for A) or column (for B) read, and every task
// then adds its product C_loc += A_panel x B_panel with one kernel call. Panels move between
// tasks only through these locations. (With a single grid column, Q = 1, an A panel's
// only reader is its owner: it is then used in place, without a location or a copy; the
// same holds for B with P = 1.) An owner publishes a panel by lending its pages to the
// location rather than copying it (hugemem.Move; the location gives them back before the
// next panel's): no panel is copied, and the panel locations never touch fresh memory,
// which in the first multiplication would cost a page fault per 4 KiB (A panels are
// copied when Freivalds' check reads them at the end). A B panel that another process
// reads is a shared buffer of its own, whose memory Move swaps with the location's: a
// process of the same host reads it in place, so it is not copied there either.
//
// Every task owns panelBuffers (three) A-panel locations (a0, a1, a2) and as many B-panel
// locations (b0, b1, b2). An owner cycles over the steps it owns through as few of them as
// keep a buffer's consecutive uses three steps apart: all three when it publishes every
// step (a single grid column for A, row for B), two when two owners take turns, one when
// three or more do; the others stay empty. Each location in use has one iterative
// write handle (its owner, FIFO position 0) and iterative read handles of every task of the
// row or column (position 1), so its FIFO cycles: write, group of reads, write, group of
// reads, one cycle per step that uses the buffer. Data of a location in another process is
// pushed to the reader's mirror when the write is released, that is while the reader is
// still multiplying earlier steps: in iteration s a task first publishes its pieces for step
// s+L (the lookahead, L = panelBuffers-1 = 2), then reads the panels of step s and
// multiplies. So the panels of the next steps travel while the current one is multiplied,
// and a buffer is not overwritten before all its readers are done with it, without any
// other synchronisation. Two steps of lookahead rather than one let the owner of a panel
// that goes to several others over one slow link send it over two steps' compute.
//
// # Why it cannot deadlock, and why it fits ORWL
//
// Give the write of step s the key (s-L, 0) and the reads of step s the key (s, 1). Every
// task takes its handles in increasing key order (publish s+L, then read s). A read of
// step s waits only for the write of step s on the same buffer (key (s-L, 0), smaller). A
// write of step s waits only for the reads of the previous use of its buffer, at a step
// s' <= s-L-1, key (s', 1) < (s-L, 0). So every access waits only for accesses with smaller
// keys; the blocked access with the smallest key always has its predecessors done, and
// some task can always move. Nested sections (the two reads of one step) are both at
// position 1, as ORWL's discipline asks. Schedule puts, on every location, the owner's
// write (position 0) before the readers (position 1), which starts every cycle right.
//
// A task whose kernel can keep C in its own memory (kernels.Accumulator: the cuBLAS kernel,
// on the device) adds each step's product to that accumulation instead of calling Dgemm on
// its host C, and copies C out once per multiplication: then only the panels cross the bus,
// each while the previous steps compute.
//
// The algorithm fits ORWL because SUMMA is a fixed, data-independent sequence of accesses
// to a few shared panels: exactly the iterative pattern that ORWL's ordered FIFOs
// describe once, at Schedule, and then run without any central coordination or
// per-message matching. Read groups make a broadcast (all readers of a panel are granted
// together), iterative handles queue the next access before the current one ends, and
// remote grants prefetch the data, which is what overlaps communication with computation.
// The order of conflicting accesses is fixed, so every task performs the same kernel calls
// on the same data whatever the timing or the number of processes: results are
// bit-identical across process counts.
//
// # Two strategies
//
// The algorithm above is the strategy blockCyclic (cyclic.go). For tasks of unequal speed
// (GPU and CPU kernels in one job), Params.Split and Params.Balance switch to the strategy
// columnSplit (balance.go), on one row of tasks: A's panels are published once, each in its
// own location, every task gathers them into its own copy of A, and computes a range of
// C's columns, with one kernel call per multiplication, whose width follows a static weight
// or, with Balance, the rates measured in the previous multiplications, exchanged through
// a location "rate" per task. Both sit behind the interface strategy; the rest (kernel,
// schedule, report, checks) is common.
//
// At the end every task publishes, once, its report (statistics and verification data,
// report.go) in its location "out" (one-shot write at position 0), which task 0 reads
// (one-shot reads at position 1) to sum up and check the result.
//
// This package computes and checks; it must not print, parse flags or start processes.
package summa

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/parallel"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// Verify selects the checks of the result; the values combine with |.
type Verify int

// Checks.
const (
	// Freivalds compares C·x with A·(B·x) for a random x: O(N²), for any N.
	Freivalds Verify = 1 << iota
	// Exact gathers C and compares it with one kernel call on the whole of A and B. It needs
	// the whole problem in task 0's memory: for small N.
	Exact
)

// Params describe one job.
type Params struct {
	N, NB int
	Grid  grid.Grid
	// Kernels names the kernel of every task (len Grid.Tasks()), as kernels.Get takes them.
	Kernels []string
	Reps    int    // multiplications, one after the other (at least 1)
	Seed    uint64 // generates A, B and the Freivalds vector
	Verify  Verify
	// Job and Place are passed to orwl.Config; nil means discovered and contiguous.
	Job   *orwl.Job
	Place func(task, procs int) int
	// Progress, when not nil, is called by task 0 after each of its steps (in balanced
	// runs, after each multiplication).
	Progress func(done, total int)
	Logger   *slog.Logger
	// Trace is passed to orwl.Config.Trace: a file for the job's Chrome trace (rank 0).
	Trace string
	// Split, when not nil, gives every task's share of C's columns (any non-negative
	// weights, one per task) instead of the block-cyclic deal: see balance.go. It needs a
	// grid of one row (P = 1).
	Split []float64
	// Balance moves the shares of C's columns after every multiplication from the rates
	// measured during it (dynamic load balancing: in proportion to the rates, then a short
	// search when tasks slow each other down; see balancer), starting from Split or from
	// equal shares. It needs a grid of one row (P = 1) and Reps > 1 to act.
	Balance bool
}

// balanced reports whether C's columns are split in ranges rather than dealt block-cyclically.
func (p *Params) balanced() bool { return p.Balance || p.Split != nil }

// TaskStats are the measurements of one task.
type TaskStats struct {
	Kernel  string
	Compute time.Duration // inside kernel calls
	Wait    time.Duration // blocked acquiring panels
	BytesIn int64         // panel bytes received from tasks of other processes
	Flops   float64
}

// Result is what task 0 learns at the end. Only the process that runs task 0 gets one.
type Result struct {
	// Seconds is the time of the fastest of the Reps multiplications (the first one pays
	// for warming up: page faults, thread pools, device buffers). A multiplication's time
	// is its slowest task's: from the end of that task's part of the previous one (for
	// the first, from its start, see FirstSeconds) to the end of its part of this one. Tasks
	// need not run in step (in the 2-D algorithm one may be a step ahead), so the time
	// between two multiplications' last ends would not be any multiplication's time.
	Seconds float64
	// FirstSeconds is the time of the first multiplication, from the moment A and B exist
	// in every task (when Schedule returns: their generation is not counted; the
	// allocation of C, the mirrors of remote panels and the first touch of all the memory
	// the multiplication uses are) to the end of a task's part of the first
	// multiplication; the slowest task's.
	FirstSeconds float64
	// FirstFaults are the page faults of the processes of the job during the first
	// multiplication: in each process, from its first task's start to the end of the
	// last one's first multiplication (as FirstSeconds), added over the processes.
	FirstFaults int64
	// MeanSeconds is the mean over the Reps multiplications: from the first task's start
	// to the last task's end, divided by Reps.
	MeanSeconds float64
	GFlops      float64 // 2N³ / Seconds
	Procs       int
	Verified    bool   // every requested check passed (false when none was requested)
	Checks      string // the checks made, e.g. "freivalds+exact", or "none"
	// FreivaldsRatio is max |C·x - A·(B·x)| / tolerance over the rows (passing: <= 1).
	FreivaldsRatio float64
	// ExactErr is max |C - C_ref| of the exact check.
	ExactErr float64
	Checksum uint64 // hash of the bits of C, identical across process counts
	Tasks    []TaskStats
	// Split is every task's share of C's columns in the last multiplication (balanced
	// runs; nil otherwise).
	Split []float64
}

// Flops returns the floating-point operations of one N x N x N multiplication.
func Flops(n int) float64 { return 2 * float64(n) * float64(n) * float64(n) }

func (p *Params) check() error {
	switch {
	case p.N < 1:
		return fmt.Errorf("summa: n is %d; need n >= 1", p.N)
	case p.NB < 1:
		return fmt.Errorf("summa: nb is %d; need nb >= 1", p.NB)
	case p.Grid.P < 1 || p.Grid.Q < 1:
		return fmt.Errorf("summa: grid %s; need P, Q >= 1", p.Grid)
	case len(p.Kernels) != p.Grid.Tasks():
		return fmt.Errorf("summa: %d kernel names for %d tasks", len(p.Kernels), p.Grid.Tasks())
	case p.Reps < 1:
		return fmt.Errorf("summa: reps is %d; need reps >= 1", p.Reps)
	case p.balanced() && p.Grid.P != 1:
		return fmt.Errorf("summa: balanced runs need a grid of one row (1x%d), not %s", p.Grid.Tasks(), p.Grid)
	case p.Split != nil && len(p.Split) != p.Grid.Tasks():
		return fmt.Errorf("summa: %d split weights for %d tasks", len(p.Split), p.Grid.Tasks())
	}
	for _, v := range p.Split {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("summa: split weight %v; need finite weights >= 0", v)
		}
	}
	return nil
}

// Run runs the job; in every process it returns when the whole job is done. The process
// that runs task 0 gets the Result, the others nil.
func Run(ctx context.Context, p Params) (*Result, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	nk := (p.N + p.NB - 1) / p.NB
	var sched *schedulePlan
	if !p.balanced() {
		sched = newSchedulePlan(p.Grid, nk, p.Reps)
	}
	var res *Result
	pins := &pinSet{}
	cfg := orwl.Config{
		Tasks:     p.Grid.Tasks(),
		Locations: locationNames(&p, nk),
		Job:       p.Job,
		Place:     p.Place,
		Logger:    p.Logger,
		Trace:     p.Trace,
	}
	err := orwl.Run(ctx, cfg, func(ctx context.Context, t *orwl.Task) error {
		pins.enter()
		defer pins.leave()
		w := &worker{p: &p, t: t, pins: pins}
		if sched != nil {
			w.s = &blockCyclic{worker: w, schedulePlan: sched}
		} else {
			w.s = &columnSplit{worker: w}
		}
		r, err := w.run(ctx)
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

// strategy is how the tasks share the work of C and move A and B between them: SUMMA on
// the 2-D block-cyclic deal (blockCyclic, cyclic.go), or ranges of C's columns over one
// row of tasks with the whole of A gathered by every task (columnSplit, balance.go). The
// worker runs what they have in common: the kernel, the schedule, the report to task 0
// and its checks. Its methods are called in order, once each, by the task's goroutine.
type strategy interface {
	// generate builds my blocks of A (w.aPanels, with generateA) and of B, and whatever
	// else I hold before Schedule, in memory from w.alloc.
	generate() error
	// declare sizes my locations and inserts my handles, before Schedule.
	declare()
	// compute runs every multiplication, after Schedule: it calls w.endRep at the end of
	// each, sets w.stop, and leaves my part of C in w.c, its global columns in w.cols.
	compute(ctx context.Context) error
	// columns returns, at task 0, the global columns of C in task k's part, given the
	// report r of task k.
	columns(k int, r *report) []int
}

// worker is one task's state, common to both strategies.
type worker struct {
	p           *Params
	t           *orwl.Task
	s           strategy
	me, gp, gq  int
	rows, cols  []int       // global rows and columns of my part of C
	aCols       []int       // global columns of my part of A
	aPanels     [][]float64 // my part of A, by local block column
	c           []float64
	gemm        kernels.Gemm
	pinner      kernels.HostPinner // my kernel's, when it reads panels faster pinned
	pins        *pinSet            // location buffers pinned for kernels that pin
	stats       TaskStats
	publish     *orwl.Handle   // my "out"
	gather      []*orwl.Handle // task 0: everybody's "out"
	start, stop time.Time

	repEnds []time.Time // when I finished my part of each multiplication
	faults  [2]int64    // this process's page faults at start and at the first repEnd
	frees   []func()    // frees what alloc allocated
}

// panelHandles are the handles of one owner's panel locations, by buffer.
type panelHandles [panelBuffers]*orwl.Handle

// panelLocation names buffer b of the A ("a") or B ("b") panels.
func panelLocation(matrix string, b int) string { return matrix + strconv.Itoa(b) }

// run is the whole of a task: its kernel, its share of A and B, the schedule, the
// multiplications, its report, and at task 0 the Result.
func (w *worker) run(ctx context.Context) (*Result, error) {
	p, t, g := w.p, w.t, w.p.Grid
	w.me = t.ID()
	w.gp, w.gq = g.Coords(w.me)
	gemm, err := kernels.Get(p.Kernels[w.me])
	if err != nil {
		return nil, fmt.Errorf("task %d: %w", w.me, err)
	}
	if c, ok := gemm.(io.Closer); ok {
		defer c.Close()
	}
	w.gemm, w.stats.Kernel = gemm, gemm.Name()
	w.pinner, _ = gemm.(kernels.HostPinner)
	defer w.free()
	w.rows, w.cols = globals(p.N, p.NB, w.gp, g.P), globals(p.N, p.NB, w.gq, g.Q)
	w.aCols = w.cols
	if err := w.s.generate(); err != nil {
		return nil, err
	}
	t.Scale("out", reportSize(p, len(w.rows), len(w.cols)))
	t.Scale("rate", 16)
	w.s.declare()
	w.publish = t.WriteInsertOnce(t.Loc(w.me, "out"), 0)
	if w.me == 0 {
		for k := range g.Tasks() {
			w.gather = append(w.gather, t.ReadInsertOnce(t.Loc(k, "out"), 1))
		}
	}
	if err := t.Schedule(ctx); err != nil {
		return nil, err
	}
	// A and B exist in every task: the first multiplication is timed from here, with the
	// allocation of C and the first touch of C, of the panel locations (sized above, not
	// yet touched; they borrow the pages of my panels, see put) and of the mirrors of
	// remote panels (allocated at their first grant).
	w.start, w.faults[0] = time.Now(), pageFaults()
	if err := w.s.compute(ctx); err != nil {
		return nil, err
	}
	if err := w.publish.Section(ctx, func(b []byte) error { return w.report().encode(b) }); err != nil {
		return nil, err
	}
	if w.me != 0 {
		return nil, nil
	}
	return w.collect(ctx)
}

// endRep records the end of my part of a multiplication, and the page faults of this
// process at the end of the first.
func (w *worker) endRep() {
	if len(w.repEnds) == 0 {
		w.faults[1] = pageFaults()
	}
	w.repEnds = append(w.repEnds, time.Now())
}

// alloc returns n float64s from the kernel's allocator when it has one (a GPU kernel's
// pinned memory), else mapped with huge pages (package hugemem), and remembers to free
// them at the end (free).
func (w *worker) alloc(n int) ([]float64, error) {
	if al, ok := w.gemm.(kernels.Allocator); ok && n > 0 {
		f, err := al.Alloc(n)
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", w.me, err)
		}
		w.frees = append(w.frees, func() { al.Free(f) })
		return f, nil
	}
	f := hugemem.Float64s(n)
	w.frees = append(w.frees, func() { hugemem.FreeFloat64s(f) })
	return f, nil
}

// allocShared is alloc for a panel that other processes read: a shared buffer
// (hugemem.AllocShared), which a process of this host reads in place.
func (w *worker) allocShared(n int) []float64 {
	b := hugemem.AllocShared(8 * n)
	w.frees = append(w.frees, func() { hugemem.Free(b) })
	return orwl.Float64s(b)
}

// free frees what alloc allocated.
func (w *worker) free() {
	for _, f := range w.frees {
		f()
	}
	w.frees = nil
}

// generateA fills my part of A, as block column panels (w.aPanels), from the front of
// mem, and returns the rest of mem.
func (w *worker) generateA(mem []float64) []float64 {
	p, g := w.p, w.p.Grid
	mloc := len(w.rows)
	for J := w.gq; J*p.NB < p.N; J += g.Q {
		wd := blockWidth(p.N, p.NB, J)
		panel := mem[: mloc*wd : mloc*wd]
		mem = mem[mloc*wd:]
		parallel.Rows(mloc, genRows(wd), func(i0, i1 int) {
			for i := i0; i < i1; i++ {
				for c := range wd {
					panel[i*wd+c] = MatrixA(p.Seed, p.N, w.rows[i], J*p.NB+c)
				}
			}
		})
		w.aPanels = append(w.aPanels, panel)
	}
	return mem
}

// genRows is the fewest rows of cols entries worth a goroutine of their own when A and B
// are generated or checked (a million entries): at large N that work takes seconds on
// one core.
func genRows(cols int) int { return max(1, (1<<20)/max(1, cols)) }

// skipStep is a step whose product every task leaves out (in balanced runs, a panel of A
// that every task leaves out of its copy of A): tests set it to check that verification
// catches a wrong result. -1 in normal runs.
var skipStep = -1

// freivalds computes my partial sums, for my rows of C, of y = C·x, z = A·(B·x) and
// bound = |A|·(|B|·|x|), over my columns. The rows of B that my columns of A multiply are
// generated whole, so no other task's data is needed.
func (w *worker) freivalds(y, z, bound []float64) {
	p := w.p
	x := make([]float64, p.N)
	for j := range x {
		x[j] = vectorX(p.Seed, j)
	}
	nloc := len(w.cols)
	bx, babs := make([]float64, len(w.aCols)), make([]float64, len(w.aCols))
	parallel.Rows(len(w.aCols), genRows(p.N), func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			var s, sa float64
			for j := range p.N {
				v := MatrixB(p.Seed, p.N, w.aCols[c], j) * x[j]
				s += v
				sa += math.Abs(v)
			}
			bx[c], babs[c] = s, sa
		}
	})
	for i := range w.rows {
		var s float64
		for c, gj := range w.cols {
			s += w.c[i*nloc+c] * x[gj]
		}
		y[i] = s
	}
	c0 := 0
	for _, panel := range w.aPanels {
		wd := len(panel) / max(len(w.rows), 1)
		for i := range w.rows {
			var s, sa float64
			for c := range wd {
				a := panel[i*wd+c]
				s += a * bx[c0+c]
				sa += math.Abs(a) * babs[c0+c]
			}
			z[i] += s
			bound[i] += sa
		}
		c0 += wd
	}
}
