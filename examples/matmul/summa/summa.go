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
// same holds for B with P = 1.)
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
// # Balanced runs
//
// For tasks of unequal speed (GPU and CPU kernels in one job), Params.Split and
// Params.Balance switch to a variant on one row of tasks: A's panels are published once,
// each in its own location, every task gathers them into its own copy of A, and computes
// a range of C's columns, with one kernel call per multiplication, whose width follows a
// static weight or, with Balance, the rates measured in the previous multiplications,
// exchanged through a location "rate" per task (balance.go).
//
// At the end every task publishes, once, its statistics and its verification data in its
// location "out" (one-shot write at position 0), which task 0 reads (one-shot reads at
// position 1) to report and check the result.
//
// This package computes and checks; it must not print, parse flags or start processes.
package summa

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/kernels/cublas"
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
	Grid  Grid
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

// header fields of a task's "out" location, in float64 slots.
const (
	hStart = iota // UnixNano bits
	hEnd
	hCompute // seconds
	hWait
	hBytes
	hChecksum // bits
	hFlops
	hC0 // balanced runs: my range of columns in the last multiplication
	hC1
	hFaults0 // page faults of my process when I started, and at the end of my first multiplication
	hFaults1
	hLen
)

// Run runs the job; in every process it returns when the whole job is done. The process
// that runs task 0 gets the Result, the others nil.
func Run(ctx context.Context, p Params) (*Result, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	nk := (p.N + p.NB - 1) / p.NB
	steps, aUses, bUses := schedule(p.Grid, nk, p.Reps)
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
		w := &worker{p: &p, t: t, steps: steps, pins: pins}
		r, err := w.run(ctx, aUses, bUses)
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

// worker is one task's state.
type worker struct {
	p           *Params
	t           *orwl.Task
	steps       []step
	me, gp, gq  int
	rows, cols  []int       // global rows and columns of my part of C
	aPanels     [][]float64 // my part of A, by local block column
	bPanels     [][]float64 // my part of B, by local block row
	c           []float64
	gemm        kernels.Gemm
	stats       TaskStats
	aW, bW      panelHandles   // my panel locations, written
	aR          []panelHandles // A panels of my grid row, by grid column and buffer
	bR          []panelHandles // B panels of my grid column, by grid row and buffer
	remoteA     []bool         // the A locations of grid column q are in another process
	remoteB     []bool         // the B locations of grid row p are in another process
	publish     *orwl.Handle   // my "out"
	gather      []*orwl.Handle // task 0: everybody's "out"
	start, stop time.Time
	aCols       []int   // global columns of my part of A
	pins        *pinSet // location buffers pinned for GPU kernels
	pinPanels   bool    // my kernel reads panels faster from pinned memory

	repEnds []time.Time // when I finished my part of each multiplication
	faults  [2]int64    // this process's page faults at start and at the first repEnd
	frees   []func()    // frees what alloc allocated

	// Balanced runs.
	cuts                []int     // column ranges of all tasks
	c0, c1              int       // my range of C's columns
	aFull, bFull, cFull []float64 // the whole of A and B; C with my range filled
	rateW               *orwl.Handle
	rateR               []*orwl.Handle
	panW, panR          []*orwl.Handle // A panels published once: mine, written; all, read
}

// panelHandles are the handles of one owner's panel locations, by buffer.
type panelHandles [panelBuffers]*orwl.Handle

// panelLocation names buffer b of the A ("a") or B ("b") panels.
func panelLocation(matrix string, b int) string { return matrix + strconv.Itoa(b) }

func (w *worker) run(ctx context.Context, aUses, bUses []bufferUses) (*Result, error) {
	p, t, g := w.p, w.t, w.p.Grid
	w.me = t.ID()
	w.gp, w.gq = g.Coords(w.me)
	gemm, err := kernels.Get(p.Kernels[w.me])
	if err != nil {
		return nil, fmt.Errorf("task %d: %w", w.me, err)
	}
	w.gemm = gemm
	_, w.pinPanels = gemm.(*cublas.Kernel)
	if c, ok := gemm.(io.Closer); ok {
		defer c.Close()
	}
	w.stats.Kernel = gemm.Name()
	defer w.free()
	if err := w.generate(); err != nil {
		return nil, err
	}
	mloc, nloc := len(w.rows), len(w.cols)
	maxW := min(p.NB, p.N)
	for b := range panelBuffers {
		if aUses[w.gq][b] > 0 && g.Q > 1 && !p.balanced() {
			t.Scale(panelLocation("a", b), 8*mloc*maxW)
		}
		if bUses[w.gp][b] > 0 && g.P > 1 {
			t.Scale(panelLocation("b", b), 8*maxW*nloc)
		}
	}
	t.Scale("out", 8*outLen(p, mloc, nloc))
	t.Scale("rate", 16)
	if p.balanced() && p.Reps > 1 {
		w.rateHandles()
	}
	myProc := t.ProcOf(w.me)
	// A panel with Q == 1 (a B panel with P == 1) is read by its owner only: it is used
	// where it is, with no location and no copy.
	for b := range panelBuffers {
		if aUses[w.gq][b] > 0 && g.Q > 1 && !p.balanced() {
			w.aW[b] = t.WriteInsert(t.Loc(w.me, panelLocation("a", b)), 0)
		}
		if bUses[w.gp][b] > 0 && g.P > 1 {
			w.bW[b] = t.WriteInsert(t.Loc(w.me, panelLocation("b", b)), 0)
		}
	}
	w.aR, w.remoteA = make([]panelHandles, g.Q), make([]bool, g.Q)
	for q := range g.Q {
		owner := g.ID(w.gp, q)
		w.remoteA[q] = t.ProcOf(owner) != myProc
		for b := range panelBuffers {
			if aUses[q][b] > 0 && g.Q > 1 && !p.balanced() {
				w.aR[q][b] = t.ReadInsert(t.Loc(owner, panelLocation("a", b)), 1)
			}
		}
	}
	w.bR, w.remoteB = make([]panelHandles, g.P), make([]bool, g.P)
	for pr := range g.P {
		owner := g.ID(pr, w.gq)
		w.remoteB[pr] = t.ProcOf(owner) != myProc
		for b := range panelBuffers {
			if bUses[pr][b] > 0 && g.P > 1 {
				w.bR[pr][b] = t.ReadInsert(t.Loc(owner, panelLocation("b", b)), 1)
			}
		}
	}
	if p.balanced() {
		w.panelHandles()
	}
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
	// yet touched) and of the mirrors of remote panels (allocated at their first grant).
	w.start, w.faults[0] = time.Now(), pageFaults()
	if !p.balanced() {
		if w.c, err = w.alloc(mloc * nloc); err != nil {
			return nil, err
		}
	}

	if p.balanced() {
		if err := w.publishOnce(ctx); err != nil {
			return nil, err
		}
		err = w.runBalanced(ctx)
	} else {
		err = w.runSteps(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := w.publish.Section(ctx, func(b []byte) error {
		w.fillOut(orwl.Float64s(b))
		return nil
	}); err != nil {
		return nil, err
	}
	if w.me != 0 {
		return nil, nil
	}
	return w.collect(ctx)
}

// runSteps is the 2-D algorithm's part of a task, after Schedule: publish the panels of
// the step lookahead steps ahead, multiply those of this one.
func (w *worker) runSteps(ctx context.Context) error {
	for s := range min(lookahead, len(w.steps)) {
		if err := w.publishPanels(ctx, s); err != nil {
			return err
		}
	}
	for s := range w.steps {
		if s+lookahead < len(w.steps) {
			if err := w.publishPanels(ctx, s+lookahead); err != nil {
				return err
			}
		}
		if err := w.multiply(ctx, s); err != nil {
			return err
		}
		if (s+1)%(len(w.steps)/w.p.Reps) == 0 {
			w.endRep()
		}
		if w.me == 0 && w.p.Progress != nil {
			w.p.Progress(s+1, len(w.steps))
		}
	}
	w.stop = time.Now()
	return nil
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

// free frees what alloc allocated.
func (w *worker) free() {
	for _, f := range w.frees {
		f()
	}
	w.frees = nil
}

// generate builds my blocks of A and B (in balanced runs, also allocates the whole of A,
// and C), in memory from alloc.
func (w *worker) generate() error {
	p, g := w.p, w.p.Grid
	w.rows = globals(p.N, p.NB, w.gp, g.P)
	w.cols = globals(p.N, p.NB, w.gq, g.Q)
	w.aCols = w.cols
	mloc, nloc := len(w.rows), len(w.cols)
	kA, kB := len(w.cols), len(w.rows) // my A has nloc columns, my B has mloc rows
	size := mloc*kA + kB*nloc
	if p.balanced() { // A as usual and whole; the whole of B; C full width
		size = mloc*kA + 3*p.N*p.N
	}
	all, err := w.alloc(size)
	if err != nil {
		return err
	}
	take := func(n int) []float64 {
		s := all[:n:n]
		all = all[n:]
		return s
	}
	for J := w.gq; J*p.NB < p.N; J += g.Q {
		wd := blockWidth(p.N, p.NB, J)
		panel := take(mloc * wd)
		for i, gi := range w.rows {
			for c := range wd {
				panel[i*wd+c] = MatrixA(p.Seed, p.N, gi, J*p.NB+c)
			}
		}
		w.aPanels = append(w.aPanels, panel)
	}
	if p.balanced() {
		w.aFull, w.bFull, w.cFull = take(p.N*p.N), take(p.N*p.N), take(p.N*p.N)
		for i := range p.N {
			for j := range p.N {
				w.bFull[i*p.N+j] = MatrixB(p.Seed, p.N, i, j)
			}
		}
		weights := p.Split
		if weights == nil {
			weights = make([]float64, g.Tasks())
			for i := range weights {
				weights[i] = 1
			}
		}
		w.setRange(cutPoints(p.N, weights))
		return nil
	}
	for I := w.gp; I*p.NB < p.N; I += g.P {
		wd := blockWidth(p.N, p.NB, I)
		panel := take(wd * nloc)
		for r := range wd {
			for j, gj := range w.cols {
				panel[r*nloc+j] = MatrixB(p.Seed, p.N, I*p.NB+r, gj)
			}
		}
		w.bPanels = append(w.bPanels, panel)
	}
	return nil
}

// publishPanels writes my pieces of the panels of step s, if I own any.
func (w *worker) publishPanels(ctx context.Context, s int) error {
	st := w.steps[s]
	if st.aCol == w.gq && w.p.Grid.Q > 1 {
		panel := w.aPanels[st.k/w.p.Grid.Q]
		if err := w.timedSection(ctx, w.aW[st.aBuf], func(b []byte) { copy(orwl.Float64s(b), panel) }); err != nil {
			return err
		}
	}
	if st.bRow == w.gp && w.p.Grid.P > 1 {
		panel := w.bPanels[st.k/w.p.Grid.P]
		if err := w.timedSection(ctx, w.bW[st.bBuf], func(b []byte) { copy(orwl.Float64s(b), panel) }); err != nil {
			return err
		}
	}
	return nil
}

// timedSection is a write section whose acquire counts as waiting.
func (w *worker) timedSection(ctx context.Context, h *orwl.Handle, fn func([]byte)) error {
	t0 := time.Now()
	if err := h.Acquire(ctx); err != nil {
		return err
	}
	w.stats.Wait += time.Since(t0)
	fn(h.Map())
	return h.Release()
}

// multiply reads the panels of step s and adds their product to C.
func (w *worker) multiply(ctx context.Context, s int) error {
	st := w.steps[s]
	g := w.p.Grid
	mloc, nloc := len(w.rows), len(w.cols)
	wd := blockWidth(w.p.N, w.p.NB, st.k)
	var a, b []float64
	var ha, hb *orwl.Handle
	var err error
	t0 := time.Now()
	if g.Q > 1 {
		ha = w.aR[st.aCol][st.aBuf]
		if a, err = w.acquirePanel(ctx, ha, w.remoteA[st.aCol]); err != nil {
			return err
		}
	} else {
		a = w.aPanels[st.k]
	}
	if g.P > 1 {
		hb = w.bR[st.bRow][st.bBuf]
		if b, err = w.acquirePanel(ctx, hb, w.remoteB[st.bRow]); err != nil {
			return errors.Join(err, release(ha))
		}
	} else {
		b = w.bPanels[st.k]
	}
	t1 := time.Now()
	w.stats.Wait += t1.Sub(t0)
	if mloc > 0 && nloc > 0 && s != skipStep {
		beta := 1.0
		if st.k == 0 {
			beta = 0
		}
		a, b = a[:mloc*wd], b[:wd*nloc]
		w.gemm.Dgemm(blas.NoTrans, blas.NoTrans, mloc, nloc, wd, 1, a, wd, b, nloc, beta, w.c, nloc)
		w.stats.Flops += 2 * float64(mloc) * float64(nloc) * float64(wd)
	}
	w.stats.Compute += time.Since(t1)
	return errors.Join(release(hb), release(ha))
}

// acquirePanel acquires h, a panel location read in the 2-D algorithm, and returns its
// data, pinned for a GPU kernel and counted in BytesIn when remote (another process's).
func (w *worker) acquirePanel(ctx context.Context, h *orwl.Handle, remote bool) ([]float64, error) {
	if err := h.Acquire(ctx); err != nil {
		return nil, err
	}
	panel := orwl.Float64s(h.Map())
	if w.pinPanels {
		w.pins.add(panel)
	}
	if remote {
		w.stats.BytesIn += int64(len(h.Map()))
	}
	return panel, nil
}

// release releases h, when there is one.
func release(h *orwl.Handle) error {
	if h == nil {
		return nil
	}
	return h.Release()
}

// skipStep is a step whose product every task leaves out (in balanced runs, a panel of A
// that every task leaves out of its copy of A): tests set it to check that verification
// catches a wrong result. -1 in normal runs.
var skipStep = -1

// outLen is the size in float64s of the "out" location of a task with an mloc x nloc part.
func outLen(p *Params, mloc, nloc int) int {
	n := hLen + p.Reps
	if p.Verify&Freivalds != 0 {
		n += 3 * mloc
	}
	if p.Verify&Exact != 0 {
		if p.balanced() {
			nloc = p.N // the final range is not known yet
		}
		n += mloc * nloc
	}
	return n
}

// fillOut writes my statistics and verification data.
func (w *worker) fillOut(out []float64) {
	if w.p.balanced() {
		w.compactC()
	}
	h := fnv.New64a()
	h.Write(orwl.Bytes(w.c))
	out[hStart] = math.Float64frombits(uint64(w.start.UnixNano()))
	out[hEnd] = math.Float64frombits(uint64(w.stop.UnixNano()))
	out[hCompute] = w.stats.Compute.Seconds()
	out[hWait] = w.stats.Wait.Seconds()
	out[hBytes] = float64(w.stats.BytesIn)
	out[hChecksum] = math.Float64frombits(h.Sum64())
	out[hFlops] = w.stats.Flops
	out[hC0], out[hC1] = float64(w.c0), float64(w.c1)
	out[hFaults0], out[hFaults1] = float64(w.faults[0]), float64(w.faults[1])
	for r, t := range w.repEnds {
		out[hLen+r] = math.Float64frombits(uint64(t.UnixNano()))
	}
	rest := out[hLen+w.p.Reps:]
	if w.p.Verify&Freivalds != 0 {
		m := len(w.rows)
		w.freivalds(rest[:m], rest[m:2*m], rest[2*m:3*m])
		rest = rest[3*m:]
	}
	if w.p.Verify&Exact != 0 {
		copy(rest, w.c)
	}
}

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
	for c, r := range w.aCols {
		var s, sa float64
		for j := range p.N {
			v := MatrixB(p.Seed, p.N, r, j) * x[j]
			s += v
			sa += math.Abs(v)
		}
		bx[c], babs[c] = s, sa
	}
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

// collect is task 0's end: read every task's "out", check and report.
func (w *worker) collect(ctx context.Context) (*Result, error) {
	p, g := w.p, w.p.Grid
	res := &Result{}
	var y, z, bound, full []float64
	if p.Verify&Freivalds != 0 {
		y, z, bound = make([]float64, p.N), make([]float64, p.N), make([]float64, p.N)
	}
	if p.Verify&Exact != 0 {
		full = make([]float64, p.N*p.N)
	}
	var first, last int64 = math.MaxInt64, math.MinInt64
	repTime := make([]float64, p.Reps) // the slowest task's time for each multiplication
	faults := map[int][2]float64{}     // by process: the first start's count, the last end's
	sums := fnv.New64a()
	for k, h := range w.gather {
		pk, qk := g.Coords(k)
		rows, cols := globals(p.N, p.NB, pk, g.P), globals(p.N, p.NB, qk, g.Q)
		if err := h.Section(ctx, func(b []byte) error {
			out := orwl.Float64s(b)
			if p.balanced() {
				c0, c1 := int(out[hC0]), int(out[hC1])
				cols = cols[:0]
				for j := c0; j < c1; j++ {
					cols = append(cols, j)
				}
				res.Split = append(res.Split, float64(c1-c0)/float64(p.N))
			}
			first = min(first, int64(math.Float64bits(out[hStart])))
			f, seen := faults[w.t.ProcOf(k)]
			if !seen {
				f = [2]float64{math.Inf(1), math.Inf(-1)}
			}
			faults[w.t.ProcOf(k)] = [2]float64{min(f[0], out[hFaults0]), max(f[1], out[hFaults1])}
			last = max(last, int64(math.Float64bits(out[hEnd])))
			res.Tasks = append(res.Tasks, TaskStats{
				Kernel:  p.Kernels[k],
				Compute: time.Duration(out[hCompute] * 1e9),
				Wait:    time.Duration(out[hWait] * 1e9),
				BytesIn: int64(out[hBytes]),
				Flops:   out[hFlops],
			})
			var cs [8]byte
			for i := range cs {
				cs[i] = byte(math.Float64bits(out[hChecksum]) >> (8 * i))
			}
			sums.Write(cs[:])
			prev := int64(math.Float64bits(out[hStart]))
			for r := range p.Reps {
				end := int64(math.Float64bits(out[hLen+r]))
				repTime[r] = max(repTime[r], float64(end-prev)/1e9)
				prev = end
			}
			rest := out[hLen+p.Reps:]
			if y != nil {
				m := len(rows)
				for i, gi := range rows {
					y[gi] += rest[i]
					z[gi] += rest[m+i]
					bound[gi] += rest[2*m+i]
				}
				rest = rest[3*m:]
			}
			if full != nil {
				for i, gi := range rows {
					for j, gj := range cols {
						full[gi*p.N+gj] = rest[i*len(cols)+j]
					}
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	res.Tasks[0].Kernel = w.stats.Kernel
	res.MeanSeconds = float64(last-first) / 1e9 / float64(p.Reps)
	res.Seconds = slices.Min(repTime)
	res.FirstSeconds = repTime[0]
	for _, f := range faults {
		res.FirstFaults += int64(f[1] - f[0])
	}
	res.GFlops = Flops(p.N) / res.Seconds / 1e9
	res.Checksum = sums.Sum64()
	res.Checks = "none"
	ok := p.Verify != 0
	eps := math.Nextafter(1, 2) - 1
	if y != nil {
		res.Checks = "freivalds"
		for i := range y {
			tol := 4*float64(p.N)*eps*bound[i] + math.SmallestNonzeroFloat64
			r := math.Abs(y[i]-z[i]) / tol
			if !(r <= 1) {
				ok = false
			}
			if !(r <= res.FreivaldsRatio) {
				res.FreivaldsRatio = r
			}
		}
	}
	if full != nil {
		if y != nil {
			res.Checks += "+exact"
		} else {
			res.Checks = "exact"
		}
		a, b, ref := make([]float64, p.N*p.N), make([]float64, p.N*p.N), make([]float64, p.N*p.N)
		for i := range p.N {
			for j := range p.N {
				a[i*p.N+j] = MatrixA(p.Seed, p.N, i, j)
				b[i*p.N+j] = MatrixB(p.Seed, p.N, i, j)
			}
		}
		w.gemm.Dgemm(blas.NoTrans, blas.NoTrans, p.N, p.N, p.N, 1, a, p.N, b, p.N, 0, ref, p.N)
		// Entries lie in [-1, 1), so |A||B| <= N entrywise; the two results differ only
		// by rounding, at most about 2Nε|A||B|.
		tol := 4 * float64(p.N) * eps * float64(p.N)
		for i := range ref {
			d := math.Abs(full[i] - ref[i])
			if !(d <= tol) {
				ok = false
			}
			if !(d <= res.ExactErr) {
				res.ExactErr = d
			}
		}
	}
	res.Verified = ok
	return res, nil
}
